"""Write a tiny local Hugging Face tokenizer (word-level) for the load-test tools: no hub download needed.

One token is one word or punctuation run (the `tokenizers` Whitespace pre-tokenizer, `\\w+|[^\\w\\s]+`), the same
rule by which the OpenAI simulator (triage/sources/metrics/openai_server.py) counts prompt tokens and emits one word
per output token, so client-side and server-side token counts agree exactly. Unknown words become the word
"unk", which decodes to one word and so re-encodes to one token.

Usage: python bench/make_tokenizer.py OUT_DIR   (needs the `tokenizers` package)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

# The simulator's output words first, then common English words and punctuation.
WORDS = """the model writes one word per token and every step of decode emits a few more until it reaches max tokens
be to in that have i for not on with he as you do at this but his by from they we say her she or an will my all
would there their what so up out if about who get which go me when make can like time no just him know take people
into year your good some could them see other than then now look only come its over think also back after use two
how our work first well way even new want because any these give day most us is are was were been has had did
said very through long where much should before here still own while last might great since against right small
large number part place case point group problem fact hand world life home system question during program under
never city open begin seem help talk turn start show hear play run move live believe hold bring happen write
provide sit stand lose pay meet include continue set learn change lead understand watch follow stop create speak
read allow add spend grow offer remember love consider appear buy wait serve die send expect build stay fall cut
reach kill remain suggest raise pass sell require report decide pull lorem ipsum dolor sit amet""".split()
PUNCT = [".", ",", "?", "!", ";", ":", "'", '"', "-", "(", ")", "/", "...", "'s"]
UNK = "unk"


def build(out: Path) -> None:
    vocab: dict[str, int] = {UNK: 0}
    for w in [*WORDS, *PUNCT]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    # "unk" is deliberately not declared a special token: decode(skip_special_tokens=True) must keep it,
    # or a prompt cut to N tokens would reach the server shorter.
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072,
        "clean_up_tokenization_spaces": False,
        "chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    (out / "special_tokens_map.json").write_text("{}\n", encoding="utf-8")
    # A minimal model config: some tools read the context length or model type next to the tokenizer.
    (out / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                 "max_position_embeddings": 131072, "vocab_size": len(vocab)},
                                                indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    build(Path(sys.argv[1]))
