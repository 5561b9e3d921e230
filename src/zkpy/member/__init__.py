"""An ensemble member's term as pure cores: `leading.LeadingCore`, `learning.LearningCore`
(following or observing). Each joins a Zab core (``zkpy.quorum``) to the request pipeline
(``zkpy.server.ServerCore``) for one term; inputs come in as method calls (link bytes, ticks,
fsync progress, client input), and one ``ready()`` list of `effects` goes out. Both the asyncio
shell (``zkpy.runtime``) and the simulator (``zkpy.testing.sim``) drive these same cores.
"""
