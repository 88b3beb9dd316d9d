#!/usr/bin/env bash
# From a folder of text files to a model that Hugging Face's transformers
# loads and samples from (docs/data.md, "Worked example"), offline:
#   1. a byte-level BPE tokenizer of 2048 tokens trained on the text (`tokenizers`)
#   2. hexic-tokenize.py: train and validation shards (whole documents held out)
#   3. a .hx model with the tokenizer's vocab
#   4. hexic compiles it for a CPU cluster, make builds the rank programs
#   5. training, with the validation loss every STEPS/4 steps and at the end
#   6. hexic-ckpt export, the tokenizer beside it: a Hugging Face model folder
#   7. transformers: from_pretrained, its loss on hexic's validation batches
#      beside hexic's, and generate continuing a held-out document
#
#   examples/hf/run.sh TEXT_DIR WORK [STEPS]     (STEPS default 200)
# TEXT_DIR: one document per file (any folder of UTF-8 text). WORK: a new
# folder for everything the run writes (refused if it exists). Environment:
# HEXIC_BIN, the folder holding hexic and hexic-ckpt (default build/ of this
# tree); CLUSTER, the cluster file (default examples/clusters/cpu1.hx).
# Needs Python's tokenizers, torch and transformers
# (`pip install tokenizers torch transformers`); exits 77 naming the one missing.
set -euo pipefail
[ $# -ge 2 ] && [ $# -le 3 ] || { sed -n '13,20p' "$0" | cut -c3-; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
text=$(cd "$1" && pwd)
work=$2
steps=${3:-200}
bin=$(realpath "${HEXIC_BIN:-$root/build}")
cluster=$(realpath "${CLUSTER:-$root/examples/clusters/cpu1.hx}")
case $steps in '' | *[!0-9]* | 0) echo "run.sh: STEPS must be a positive number, not '$steps'" >&2; exit 2 ;; esac
missing=$(python3 -c 'import importlib.util as u
print(" ".join(m for m in ("tokenizers", "torch", "transformers") if not u.find_spec(m)))')
[ -z "$missing" ] ||
  { echo "run.sh: missing Python packages: $missing (pip install tokenizers torch transformers)" >&2; exit 77; }
[ -e "$work" ] && { echo "run.sh: $work exists: refusing to write into it (pick a new folder)" >&2; exit 1; }
mkdir -p "$work" && cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

echo "== 1. a byte-level BPE tokenizer trained on $text"
python3 - "$text" <<'EOF'
import json, os, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
files = sorted(os.path.join(d, f) for d, _, names in os.walk(sys.argv[1]) for f in names
               if not f.startswith("."))
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train(files, trainers.BpeTrainer(vocab_size=2048, special_tokens=["<|endoftext|>"],
                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                     show_progress=False))
os.makedirs("tok")
tok.save("tok/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"},
          open("tok/tokenizer_config.json", "w"))
print(f"tok/tokenizer.json: {tok.get_vocab_size()} tokens from {len(files)} files")
EOF

echo "== 2. hexic-tokenize: shards"
python3 "$root/rtlib/tools/hexic-tokenize.py" "$text" -t tok -o text | tee tokenize.log
vocab=$(sed -n 's/^put in the model block: vocab = \([0-9]*\)$/\1/p' tokenize.log)

echo "== 3. the model (text.hx)"
cat >text.hx <<EOF
model "text" {
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = $vocab; seq_len = 64
}
train {
  global_batch = 32
  precision = fp32
  lr = 1e-3; warmup_steps = $((steps / 20)); steps = $steps; seed = 1
  data = "text.train.bin"
}
EOF
cat text.hx

echo "== 4. hexic text.hx $(basename "$cluster"), make"
"$bin/hexic" text.hx "$cluster" --target=cpu -o out
make -s -C out -j2 >make.log

echo "== 5. train $steps steps"
every=$(( steps >= 4 ? steps / 4 : 1 ))
out/launch.sh --val-data text.val.bin --val-every "$every" --val-batches 2 \
  --checkpoint-dir checkpoints | tee train.log

echo "== 6. export: a Hugging Face folder (hf/)"
mkdir hf
"$bin/hexic-ckpt" export checkpoints -o hf/model.safetensors
cp tok/* hf/

echo "== 7. transformers: from_pretrained, the validation loss, generate"
hexic_val=$(sed -n 's/^val step [0-9]*\/[0-9]* | loss \([^ ]*\) .*/\1/p' train.log | tail -n 1)
python3 - "$hexic_val" <<'EOF'
import sys
import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
transformers.utils.logging.disable_progress_bar()
tok = AutoTokenizer.from_pretrained("hf")
model = AutoModelForCausalLM.from_pretrained("hf", dtype=torch.float32).eval()
# hexic's validation batches: sequence g of the val shard starts at (g*T) mod (N - T - 1)
# (docs/programs.md), 2 batches of the global batch B
ids = np.fromfile("text.val.bin", dtype="<u2", offset=1024).astype(np.int64)
B, T, n = 32, model.config.max_position_embeddings, len(ids)
starts = [(g * T) % (n - T - 1) for g in range(2 * B)]
x = torch.from_numpy(np.stack([ids[s:s + T] for s in starts]))
y = torch.from_numpy(np.stack([ids[s + 1:s + T + 1] for s in starts]))
with torch.no_grad():
    logits = model(input_ids=x).logits
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
hexic = float(sys.argv[1])
print(f"validation loss: transformers {loss:.6f}, hexic {hexic:.6f} "
      f"({abs(loss - hexic) / hexic:.1e} relative)")
# a held-out document's first 8 tokens, continued greedily until end of document
prompt = torch.from_numpy(ids[None, :8].copy())
out = model.generate(prompt, max_new_tokens=40, do_sample=False, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.eos_token_id)
print("prompt:     " + repr(tok.decode(prompt[0])))
print("continued:  " + repr(tok.decode(out[0][8:], skip_special_tokens=False)))
EOF
