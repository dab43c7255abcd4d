"""torch.compile under the capture: captured iterations run compiled code eagerly.

The capture's hooks record tensors and its dispatch mode derives layouts, one Python call per
module and operator: a compiled full graph (torchtitan compiles each block with
fullgraph=True) runs neither, and refuses a graph break or a dispatch mode outright. So while
an iteration is captured, torch.compile's stance is "force_eager": compiled modules and
functions run as the eager model does, and the trace holds the eager model's tensors, named
as in it. The other iterations run compiled."""

import torch


class EagerStance:
    """Holds torch.compile's "force_eager" stance while on; restores the previous one when
    off."""

    def __init__(self):
        self._held = None

    def hold(self, on):
        if on and self._held is None:
            self._held = torch.compiler.set_stance("force_eager")  # takes effect now
        elif not on and self._held is not None:
            self._held.__exit__(None, None, None)
            self._held = None
