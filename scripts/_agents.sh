# Shared by scripts/run.sh and scripts/publish_baselines.sh (sourced): the display name and
# metadata of the baseline agents on the leaderboard, and the folder name of an agent spec.
agent_name() {
  case "$1" in
    oracle) echo "oracle (per-environment solver)" ;;
    random) echo "random (uniform over valid actions)" ;;
    hf:smollm2) echo "SmolLM2-135M-Instruct (bundled, zero-shot)" ;;
    hf:smollm2+frozenlake-local) echo "SmolLM2-135M-Instruct + frozenlake-local LoRA (RL-trained, admissible replies)" ;;
    *) echo "$1" ;;
  esac
}
agent_meta() {
  case "$1" in
    oracle | random) echo "kind=baseline" ;;
    hf:smollm2) echo "model=HuggingFaceTB/SmolLM2-135M-Instruct" ;;
    hf:smollm2+frozenlake-local) echo "model=HuggingFaceTB/SmolLM2-135M-Instruct+envgym/adapters/frozenlake-local" ;;
    *) echo "kind=agent" ;;
  esac
}
# hf:smollm2 -> hf-smollm2; the server URL of openai:MODEL@URL is left out.
slug() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | sed -E 's/@.*//; s/[^a-z0-9]+/-/g; s/^-+|-+$//g'; }
