# usage: ab.sh ARM WAIT_PATTERN EXTRA...   (arm A: the former default, --optimizer adam; arm B: today's default)
echo 10 > /proc/self/autogroup; export OMP_NUM_THREADS=1
arm=$1; pat=$2; shift 2
while pgrep -f "$pat" > /dev/null; do sleep 20; done
cd /work/data/ab
echo "arm $arm start $(date -u)"
/usr/bin/time -v nice -n 10 python -m sampledlm train --train train9m.txt --valid valid20k.txt \
  --vocab /work/data/wiki/vocab.txt --model gru --objective css-is --epochs 1 --valid-every 2000 \
  --threads 1 --device cpu "$@" -o run$arm
echo "arm $arm end $(date -u) rc=$?"
