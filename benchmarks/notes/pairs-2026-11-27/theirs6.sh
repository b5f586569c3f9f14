#!/bin/bash
/work/frnn/run.sh gru-hs-r12; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r12 -nce 20; echo "nce done $(date -u +%T)"; /work/frnn/run.sh gru-hs-r13; echo "hs done $(date -u +%T)"
