"""kthena-compatible KV-cache scoring: hashing, Redis key layout, tier weights, prefix scoring.

Pure library: no Django imports. docs/compatibility.md section 2 is the contract.
"""
