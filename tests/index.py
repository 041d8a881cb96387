"""What the tests' index holds: the model the tests serve."""

MODEL = "Qwen/Qwen3-8B"
"""The model of every test that needs one; a test about a second model uses OTHER_MODEL."""

OTHER_MODEL = "meta-llama/Llama-3.1-8B"
"""A second model, for tests about what one model's entries do (or do not do) to another's."""
