"""An ensemble member as pure cores. The member core (`peer.PeerCore`) decides the lifecycle:
recovery or carry-over, election or designated leader, each term's role, configs, read-only
service. Each term is a term core, `leading.LeadingCore` or `learning.LearningCore` (following or
observing), that joins a Zab core (``zkpy.quorum``) to the request pipeline
(``zkpy.server.core.ServerCore``, in its leader or learner form) for one term; `term` is what the
two share, the hub of the serving processes included (`workers`). Inputs come in as method calls
(link bytes, ticks, fsync progress, client input), and one ``ready()`` list of `effects` goes out.
`datadir` holds the disk steps of a recovery and of a TRUNC, `history` what a term hands the next,
`read_only` when read-only service starts, `quorum_auth` quorum SASL's accepting side. Both the
asyncio shell (``zkpy.runtime``) and the simulator (``zkpy.testing.sim``) drive these same cores
and only run their effects.
"""
