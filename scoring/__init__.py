"""kthena-compatible KV-cache scoring: hashing, Redis key layout, tier weights, prefix scoring.

Pure library: no Django imports. SPEC section 2 is the contract.
"""
