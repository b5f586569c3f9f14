#!/bin/bash
/work/frnn/run.sh gru-hs-r4; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r4 -nce 20; echo "nce done $(date -u +%T)"
