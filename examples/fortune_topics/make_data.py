#!/usr/bin/env python3
"""Real labelled text for sequence classification, from Debian's fortunes.

Each fortune becomes one example labelled with the file it comes from:
computers, politics, science or songs-poems (four topics, about 3,100 texts,
written by people, not generated). The examples are shuffled with a fixed
seed and split into train and eval files:

    python3 examples/fortune_topics/make_data.py OUT_DIR

writes OUT_DIR/train.jsonl and OUT_DIR/eval.jsonl, one
{"text": ..., "label": "<topic>"} per line. Standard library only; needs
Debian's `fortunes` package (/usr/share/games/fortunes).
"""
import json
import os
import random
import sys

TOPICS = ["computers", "politics", "science", "songs-poems"]
FORTUNES = "/usr/share/games/fortunes"
EVAL_SHARE = 0.15
SEED = 1234


def fortunes(topic):
    path = os.path.join(FORTUNES, topic + ".u8")
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for entry in text.split("\n%\n"):
        entry = entry.strip()
        if entry and entry != "%":
            yield entry


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_data.py OUT_DIR")
    out = sys.argv[1]
    if not os.path.isdir(FORTUNES):
        sys.exit(f"{FORTUNES} is missing: apt-get install fortunes")
    examples = [{"text": t, "label": topic} for topic in TOPICS for t in fortunes(topic)]
    random.Random(SEED).shuffle(examples)
    n_eval = int(len(examples) * EVAL_SHARE)
    os.makedirs(out, exist_ok=True)
    for name, part in (("eval.jsonl", examples[:n_eval]), ("train.jsonl", examples[n_eval:])):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            for e in part:
                f.write(json.dumps(e, ensure_ascii=False) + "\n")
    counts = {t: sum(e["label"] == t for e in examples[n_eval:]) for t in TOPICS}
    print(f"{out}: {len(examples) - n_eval} train / {n_eval} eval texts; train per topic: {counts}")


if __name__ == "__main__":
    main()
