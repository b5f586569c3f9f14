#!/bin/bash
/work/frnn/run.sh gru-hs-r5; echo "hs done $(date -u +%T)"; /work/frnn/run.sh gru-nce-r5 -nce 20; echo "nce done $(date -u +%T)"
