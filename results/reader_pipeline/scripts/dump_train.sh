#!/bin/bash
HERE="$(cd "$(dirname "$0")" && pwd)"; OUT="${OUT:-/work/exp}"
cd "$HERE/../../.."
Q=lab/chapterverse_lab/reader_data/questions
export CHAPTERVERSE_HOME=/work/cvhome-train PYTHONPATH="$PWD"
.venv/bin/python "$HERE/dump_features.py" $OUT/feat2_trainA.jsonl t1 $Q/FAA-G-ACS-2_ACS-Companion-Guide-for-Pilots.jsonl t1 $Q/FAA-S-ACS-25_Flight-Instructor-Airplane-ACS.jsonl t2 $Q/asymptote.jsonl t2 $Q/autoconf.jsonl t6 $Q/hyperref.jsonl t6 $Q/xcolor.jsonl t5 $Q/gmpl.jsonl t5 $Q/gnu-maintain.jsonl t5 $Q/gnu-standards.jsonl > $OUT/dump_trainA.log 2>&1 &
.venv/bin/python "$HERE/dump_features.py" $OUT/feat2_trainB.jsonl t3 $Q/beameruserguide.jsonl t3 $Q/debian-reference.jsonl t4 $Q/developers-reference.jsonl t4 $Q/glpk.jsonl t7 $Q/zsh.jsonl > $OUT/dump_trainB.log 2>&1 &
wait
echo done $(date)
