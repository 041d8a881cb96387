"""The embedded Redis keeps kthena's matrix hashes compact whatever the length of the pod ids
(Kubernetes pod names plus namespace easily pass Redis's 64-byte default for listpack
entries), in the persistent configuration `make run` uses."""

import redis

from kvadmin.redis_server import RedisServer
from scoring.keys import block_key
from tests.index import MODEL

POD = "vllm-qwen3-8b-instruct-decode-7c9f8d6b5-x2x7k.llm-inference-production"


def test_a_matrix_hash_owned_by_a_long_pod_id_stays_a_listpack(tmp_path) -> None:
    with RedisServer(data_dir=tmp_path / "redis") as server:
        client = redis.Redis(port=server.port)
        client.hset(block_key(MODEL, 12345), POD, "1764590000|GPU")
        assert len(POD) > 64
        assert client.object("encoding", block_key(MODEL, 12345)) == b"listpack"
        client.close()
