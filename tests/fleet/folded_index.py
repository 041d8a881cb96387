"""A minimal index for tests: folds one stream's events the way kvadmin's index does (engine
hash -> standardized hash from stores with tokens, placeholders resolved through that mapping,
removals per medium, a clear or a restart drops everything)."""

from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored, Event
from scoring.hashing import hash_block


class FoldedIndex:
    def __init__(self) -> None:
        self.std_of: dict[str, int] = {}
        self.held: set[tuple[str, str]] = set()

    def clear(self) -> None:
        self.held.clear()

    def apply(self, event: Event) -> None:
        if isinstance(event, AllBlocksCleared):
            self.clear()
        elif isinstance(event, BlockStored):
            for i, key in enumerate(event.block_hashes):
                if event.token_ids:
                    size = event.block_size
                    self.std_of[key] = hash_block(event.token_ids[i * size : (i + 1) * size])
                assert key in self.std_of, "a placeholder names a block never stored with tokens"
                self.held.add((key, event.medium or ""))
        elif isinstance(event, BlockRemoved):
            for key in event.block_hashes:
                assert (key, event.medium) in self.held, "removal of a block not held there"
                self.held.discard((key, event.medium or ""))

    def contents(self) -> set[tuple[int, str]]:
        return {(self.std_of[key], medium) for key, medium in self.held}
