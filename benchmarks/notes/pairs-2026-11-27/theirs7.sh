#!/bin/bash
/work/frnn/run.sh gru-hs-r14; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r14 -nce 20; echo "nce done $(date -u +%T)"
/work/frnn/run.sh gru-hs-r15; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r15 -nce 20; echo "nce done $(date -u +%T)"
