"""A long list (an SDK agent's message history) stored content-addressed across checkpoints.

Each checkpoint of an SDK agent used to embed the SDK's whole history, so a run stored
O(steps²) bytes. Here a list is cut into blocks of BLOCK items from its start; each full block
is a blob (`checkpoints.blobstore`) holding its items and the key of the block before it:

    chunk = canonical JSON of {"items": [... BLOCK items ...], "prev": <key of the previous
    chunk> | null}

so the chunks form a chain (a hash chain: a head key fixes every item before it). The
checkpoint keeps, in place of the list, `{"$history": <head key>, "n": <items in the chain>,
"tail": [<the items after the last full block>]}`: its size does not grow with the run, and a
block is stored once for every checkpoint that shares it (a rollback, a fork, a replay keep
the head their checkpoint names: exactly that checkpoint's list). A list shorter than one
block stays a plain list, as every checkpoint written before this stays readable as it is.

`HistoryChunks` is one run's writer (its blocks remembered so a checkpoint hashes only the
new ones; the chunks it made are for the caller to insert with the checkpoint that names
them); `history_expand` reads a list back (verified: the blob store checks each chunk
against its key); `history_heads` names the chains a value holds, for the reference counts
(checkpoints.retention.refcounts, kind "h": a chunk's holders are the checkpoints naming it
as head and the live chunks naming it as `prev`).

An SDK's serialized state (the OpenAI Agents SDK's RunState, as its dict: `{"$tree": {...}}`,
or as a JSON text: `{"$json": {...}}`) has its lists compacted the same way at any depth, and
its dicts of BLOCK keys or more (the SDK's approvals and tool invocations by call id) stored
as chains of their [key, value] pairs, `"dict": true` in their mark
(`HistoryChunks.compact_json`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_key, blob_store
from tasks.canonical import canonical_bytes

BLOCK = 16
MARK = "$history"
JSON_MARK = "$json"
TREE_MARK = "$tree"


class HistoryBroken(Exception):
    """A chain cannot be read back whole (a chunk missing, damaged or inconsistent)."""


def _chunk(items: list[Any], prev: str | None) -> bytes:
    return canonical_bytes({"items": items, "prev": prev})


class HistoryChunks:
    """One run's writer of chained chunks: `compact` a list (by its name in the state),
    `take_chunks` the new chunks to store with the checkpoint, `forget` after a failed write."""

    def __init__(self) -> None:
        # name -> [(a block's items, its key)]: the chain as last written (or read back).
        self.blocks: dict[str, list[tuple[list[Any], str]]] = {}
        self.unstored: dict[str, bytes] = {}
        # name -> (the serialized state compact_json was last given, what it made of it): the
        # same object again (an SDK state kept while a run records what follows it) is not
        # walked again, so a checkpoint's cost does not grow with it.
        self.json_last: dict[str, tuple[Any, Any]] = {}

    def compact(self, name: str, items: Any, *, deep: bool = False) -> Any:
        """`items` as a checkpoint keeps it: a list of BLOCK items or more as its chain's head
        and the items after the last full block. `deep` (inside a JSON text): a dict of BLOCK
        keys or more as a chain of its [key, value] pairs, and what shorter lists and dicts
        hold compacted the same way; anything else unchanged."""
        if isinstance(items, list) and len(items) >= BLOCK:
            return self._chained(name, items, self._kept(name, items))
        if deep and isinstance(items, dict) and len(items) >= BLOCK:
            return self._pairs_chained(name, items)
        if deep and isinstance(items, dict):
            return {k: self.compact(f"{name}.{k}", v, deep=True) for k, v in items.items()}
        if deep and isinstance(items, list):
            return [self.compact(f"{name}.{i}", v, deep=True) for i, v in enumerate(items)]
        return items

    def _kept(self, name: str, items: list[Any]) -> list[tuple[list[Any], str]]:
        """The blocks of the chain last written that `items` still starts with. A block equal
        to its items is kept as those items: an SDK may dump a message again (a new object,
        the same content) before it settles, and compared by identity next time, the check
        costs the same however long the history is, not a deep compare of every block."""
        known = self.blocks.get(name, [])
        keep = 0
        while keep < min(len(known), len(items) // BLOCK):
            block = items[keep * BLOCK : (keep + 1) * BLOCK]
            stored, key = known[keep]
            if stored != block:
                break
            known[keep] = (block, key)
            keep += 1
        return known[:keep]

    def _chained(
        self, name: str, items: list[Any], chain: list[tuple[list[Any], str]], **mark: Any
    ) -> dict[str, Any]:
        """`items` (the first ones already in `chain`) as a chain's head and a tail."""
        full = len(items) // BLOCK
        for index in range(len(chain), full):
            block = items[index * BLOCK : (index + 1) * BLOCK]
            body = _chunk(block, chain[-1][1] if chain else None)
            key = blob_key(body)
            self.unstored[key] = body
            chain.append((block, key))
        self.blocks[name] = chain
        return {MARK: chain[-1][1], "n": full * BLOCK, "tail": items[full * BLOCK :], **mark}

    def _pairs_chained(self, name: str, value: dict[str, Any]) -> dict[str, Any]:
        """A dict as a chain of its [key, value] pairs: the pairs of the chain last written
        first, while they hold (an SDK may serialize its keys sorted: a new key would move
        every block after it), then the new keys in the dict's order."""
        chain: list[tuple[list[Any], str]] = []
        for pairs, key in self.blocks.get(name, []):
            if not all(k in value and value[k] == v for k, v in pairs):
                break
            chain.append((pairs, key))
        done = {k for pairs, _key in chain for k, _v in pairs}
        items = [pair for pairs, _key in chain for pair in pairs]
        items += [[k, v] for k, v in value.items() if k not in done]
        return self._chained(name, items, chain, dict=True)

    def compact_json(self, name: str, value: Any) -> Any:
        """An SDK's serialized state, as a JSON text or its dict (the OpenAI Agents SDK's
        RunState): its lists and large dicts compacted at any depth (`compact`, deep)."""
        last = self.json_last.get(name)
        if last is not None and last[0] is value:
            return last[1]
        kept = self._json_compacted(name, value)
        self.json_last[name] = (value, kept)
        return kept

    def _json_compacted(self, name: str, value: Any) -> Any:
        mark = TREE_MARK
        if isinstance(value, str):
            mark, value = JSON_MARK, json.loads(value)
        if not isinstance(value, dict):
            return value
        return {mark: {k: self.compact(f"{name}.{k}", v, deep=True) for k, v in value.items()}}

    def compact_state(self, state: Any, json_keys: tuple[str, ...] = ()) -> Any:
        """An SDK's state (a dict) as a checkpoint keeps it: its lists compacted, and the
        top-level lists of the JSON texts under `json_keys`."""
        if not isinstance(state, dict):
            return state
        return {
            key: self.compact_json(key, value) if key in json_keys else self.compact(key, value)
            for key, value in state.items()
        }

    def take_chunks(self) -> dict[str, bytes]:
        chunks, self.unstored = self.unstored, {}
        return chunks

    def forget(self) -> None:
        """The last write failed: its chunks may not be stored, so the next one writes every
        chunk it names again (inserts skip the stored ones)."""
        self.blocks = {}
        self.unstored = {}
        self.json_last = {}


def _chain(head: str, n: int) -> list[tuple[list[Any], str]]:
    store = blob_store()
    blocks: list[tuple[list[Any], str]] = []
    key: str | None = head
    while key is not None:
        if len(blocks) * BLOCK >= n:
            raise HistoryBroken(f"history chain {head[:12]} is longer than its {n} items")
        try:
            body = json.loads(store.get(key))
            blocks.append((body["items"], key))
            key = body["prev"]
        except (BlobMissing, BlobCorrupted, ValueError, KeyError, TypeError) as exc:
            raise HistoryBroken(f"history chunk {key[:12]} unreadable ({exc})") from None
    blocks.reverse()
    if sum(len(items) for items, _key in blocks) != n:
        raise HistoryBroken(f"history chain {head[:12]} does not hold its {n} items")
    return blocks


def history_expand(
    value: Any, *, name: str = "", into: HistoryChunks | None = None, deep: bool = False
) -> Any:
    """The list, dict or JSON text a compacted value stands for; anything else unchanged.
    `into`: the run's writer learns the chains (its next checkpoint stores only new blocks).
    Raises HistoryBroken."""
    if isinstance(value, dict) and MARK in value:
        blocks = _chain(str(value[MARK]), int(value["n"]))
        if into is not None:
            into.blocks[name] = blocks
        items = [item for block, _key in blocks for item in block] + list(value["tail"])
        return {k: v for k, v in items} if value.get("dict") else items
    if isinstance(value, dict) and (JSON_MARK in value or TREE_MARK in value):
        inner = value[JSON_MARK] if JSON_MARK in value else value[TREE_MARK]
        tree = {
            k: history_expand(v, name=f"{name}.{k}", into=into, deep=True) for k, v in inner.items()
        }
        return json.dumps(tree) if JSON_MARK in value else tree
    if deep and isinstance(value, dict):
        return {
            k: history_expand(v, name=f"{name}.{k}", into=into, deep=True) for k, v in value.items()
        }
    if deep and isinstance(value, list):
        return [
            history_expand(v, name=f"{name}.{i}", into=into, deep=True) for i, v in enumerate(value)
        ]
    return value


def history_expand_state(state: Any, *, into: HistoryChunks | None = None) -> Any:
    """An SDK's state as `HistoryChunks.compact_state` kept it, whole again."""
    if not isinstance(state, dict):
        return state
    return {key: history_expand(value, name=key, into=into) for key, value in state.items()}


def history_heads(value: Any) -> Iterator[str]:
    """The chain heads a (compacted) state names, at any depth."""
    if isinstance(value, dict):
        if MARK in value and isinstance(value[MARK], str):
            yield value[MARK]
            return
        for inner in value.values():
            yield from history_heads(inner)
    elif isinstance(value, list):
        for inner in value:
            if isinstance(inner, dict | list):
                yield from history_heads(inner)


def history_chunk_keys(heads: Iterator[str] | list[str]) -> set[str]:
    """Every chunk of these chains (for accounting: what a task's history stores)."""
    store = blob_store()
    keys: set[str] = set()
    for head in heads:
        key: str | None = head
        while key is not None and key not in keys:
            keys.add(key)
            prev = chunk_prev(store.get(key))
            key = prev[0] if prev else None
    return keys


def chunk_prev(body: bytes) -> list[str]:
    """What a stored chunk names (the chunk before it), for the reference counts."""
    try:
        prev = json.loads(body).get("prev")
    except (ValueError, AttributeError):
        return []
    return [prev] if isinstance(prev, str) else []
