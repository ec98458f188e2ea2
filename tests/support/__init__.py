"""Helpers shared by the test modules: signed transactions (:mod:`tests.support.transactions`),
child processes as ``/proc`` shows them and calls made with a deadline
(:mod:`tests.support.processes`)."""
