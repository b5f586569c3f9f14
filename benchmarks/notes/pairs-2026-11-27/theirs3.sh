#!/bin/bash
/work/frnn/run.sh gru-hs-r6; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r6 -nce 20; echo "nce done $(date -u +%T)"; /work/frnn/run.sh gru-hs-r7; echo "hs done $(date -u +%T)"
