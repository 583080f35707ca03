"""Errors a user reads. Each names where the problem is (file and key)."""
import functools


class KollaError(Exception):
    """Base class: the message is meant for an operator, not a traceback."""


class ValidationError(KollaError):
    """Bad input (globals, passwords, overrides, specs, CLI arguments).

    Holds every problem found so that one run reports them all.
    """

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class ImageMissing(KollaError):
    pass


class HealthTimeout(KollaError):
    pass


class ContainerExited(HealthTimeout):
    """The container's process ended before its check passed."""


class JobFailed(KollaError):
    pass


class NoEarlierGeneration(KollaError):
    """A rollback of a container that has run no other healthy generation: a set's
    rollback passes over it (nothing of it changed)."""


def said_as(error_class):
    """A decorator for the Salt modules' functions: kolla-salt's refusals raised as
    `error_class` (Salt's CommandExecutionError, given by the module: this library
    imports no Salt), so that Salt says the message, not a traceback, on salt-call's
    stderr and in a master's return."""
    def decorator(action):
        @functools.wraps(action)
        def said(*args, **kwargs):
            try:
                return action(*args, **kwargs)
            except KollaError as refused:
                raise error_class(str(refused)) from None
        return said
    return decorator
