#!/usr/bin/env bash
# Rebuild the published baseline entries of a suite's leaderboard under leaderboards/:
#   leaderboards/<suite>/<run date>_<agent>.envgym.jsonl.gz   the bundles of the baseline agents,
#                                                             each verified by replay
#   leaderboards/site/                                        a static export of a board built
#                                                             from every published bundle of every
#                                                             suite (generated output: git ignores it)
# The bench runs are kept under $ENVGYM_RUNS/<suite>/<agent> (for core-v1 the main job's, see
# scripts/run.sh): a finished run is reused as it is, a missing or unfinished one is run or
# resumed here. Bundles are deterministic (the same run gives the same file), so re-running this
# script changes nothing but the site's submission times.
#
# Settings (environment): ENVGYM_SUITE (default core-v1), ENVGYM_AGENTS (default
# "random oracle hf:smollm2 hf:smollm2+frozenlake-local" for core-v1, "random oracle" for other suites), ENVGYM_RUNS (default
# runs/main), ENVGYM_TEXT_CAP (characters kept of each observation and completion in the
# published bundles, default 600). E.g. ENVGYM_SUITE=webshop-v1 bash scripts/publish_baselines.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE="${ENVGYM_SUITE:-core-v1}"
if [ "$SUITE" = core-v1 ]; then default_agents="random oracle hf:smollm2 hf:smollm2+frozenlake-local"; else default_agents="random oracle"; fi
read -r -a AGENTS <<<"${ENVGYM_AGENTS:-$default_agents}"
RUNS="${ENVGYM_RUNS:-runs/main}"
TEXT_CAP="${ENVGYM_TEXT_CAP:-600}"
PUBLISHED="leaderboards/$SUITE"
SITE=leaderboards/site
EG=.venv/bin/envgym
PY=.venv/bin/python
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ ! -x "$EG" ]; then
  echo "no .venv: run 'ENVGYM_EXTRAS=llm,leaderboard bash scripts/setup.sh' (or scripts/run.sh) first" >&2
  exit 2
fi

# shellcheck source=scripts/_agents.sh
source scripts/_agents.sh

mkdir -p "$PUBLISHED"
for spec in "${AGENTS[@]}"; do
  run="$RUNS/$SUITE/$(slug "$spec")"
  echo "== $spec ($run)"
  "$EG" bench run "$SUITE" --agent "$spec" --out "$run" >/dev/null  # reuse, resume or run
  day=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["created"][:10].replace("-", ""))' "$run/bench.json")
  bundle="$PUBLISHED/${day}_$(slug "$spec").envgym.jsonl.gz"
  for old in "$PUBLISHED"/*_"$(slug "$spec")".envgym.jsonl.gz; do
    if [ -e "$old" ] && [ "$old" != "$bundle" ]; then rm -v "$old"; fi  # an older run of this agent
  done
  "$EG" leaderboard submit "$run" --out "$bundle" --text-cap "$TEXT_CAP" \
    --name "$(agent_name "$spec")" --meta "$(agent_meta "$spec")"
  "$EG" leaderboard verify "$bundle" >/dev/null  # exit 1 with the reason if the replay disagrees
  echo "   verified by replay: $bundle"
done

# A board built from the published bundles alone (a fresh database, every suite's), exported as
# static files.
db="$RUNS/publish/leaderboard.db"
rm -f "$db" "$db-wal" "$db-shm"
mkdir -p "$(dirname "$db")"
for bundle in leaderboards/*/*.envgym.jsonl.gz; do
  "$EG" leaderboard submit "$bundle" --db "$db" >/dev/null
done
"$EG" leaderboard list --db "$db" --suite "$SUITE"
rm -rf "$SITE"
"$EG" leaderboard export "$SITE" --db "$db"
du -sh "$PUBLISHED" "$SITE"
