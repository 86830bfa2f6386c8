"""The transactional producer (KIP-98, KIP-447, KIP-890): the calls `Producer` exposes (`api`), the engine that
runs them (`manager`), and the pure rules they follow (`state`, `verdicts`, `group`). Internal but for `api`.
"""
