"""sys-advisor's calculation results: values, validation, block cpusets, application and the
decisions around them (cpu-policy §11.1, §11.3, §11.5–§11.8).

* ``response``: the calculation result as plain values, its journal form and fingerprint;
* ``validation``: §11.6, the three validators and ``get_blocks``;
* ``blocks``: §11.7, block ids to cpusets;
* ``application``: §11.8, the blocks applied as CPU events;
* ``decision``: ``apply_advice`` and the request-based fallback as pure decisions;
* ``push``: §11.3, the AddContainer requests for every stored container;
* ``checkpoint``: §11.4, the GetCheckpoint answer from a state.
"""
