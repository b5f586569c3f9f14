#!/bin/bash
/work/frnn/run.sh gru-hs-r8; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r8 -nce 20; echo "nce done $(date -u +%T)"; /work/frnn/run.sh gru-hs-r9; echo "hs done $(date -u +%T)"
