"""Fault injection on the lab: ``python -m harness.faults [--vm] …`` (``scripts/faults``, as root).

Interrupt applied live runs and check that the lab's server is put back, automatically or by one
``tunepath restore``. One :class:`harness.faults.harness.Harness` runs the trials on one of two
targets (:class:`harness.faults.target.Target`):

- the namespace lab's server (:mod:`harness.faults.server`; fault kinds ``sigint``, ``sigkill``,
  ``sshd``, ``link``; results ``build/faults.json``);
- with ``--vm``, the lab's VM guest (:mod:`harness.faults.vm`; kinds ``grub``, ``dropin``,
  ``rebootwait``, ``controller``; results ``build/faults-vm.json``).

The modules: :mod:`~harness.faults.cli` (options, clean-up, exit status),
:mod:`~harness.faults.harness` (the course of a trial), :mod:`~harness.faults.probe` (the
controller subprocess, this machine, the namespace server read as root),
:mod:`~harness.faults.guest` (the VM over SSH, QEMU's power and console),
:mod:`~harness.faults.state` (the server states compared), :mod:`~harness.faults.report` (the
trial record, the table, the JSON results).
"""
