"""What the Salt modules tell Salt when kolla-salt refuses (kolla_salt.errors.said_as,
kolla_salt.declaration.inventory.compiled): the operator's message, as Salt's own error."""
import pytest

from kolla_salt.declaration.inventory import compiled
from kolla_salt.errors import KollaError, ValidationError, said_as


class SaltsError(Exception):   # stands for salt.exceptions.CommandExecutionError
    pass


def test_a_refusal_is_raised_as_the_given_error_with_its_message_and_other_errors_pass_unchanged():
    @said_as(SaltsError)
    def action(error):
        raise error

    with pytest.raises(SaltsError, match="^globals.yml: enable_mariadb: expected true or false$") as raised:
        action(ValidationError(["globals.yml: enable_mariadb: expected true or false"]))
    assert raised.value.__cause__ is None and raised.value.__suppress_context__   # no traceback of ours
    with pytest.raises(ZeroDivisionError):   # a defect stays a defect, with its traceback
        action(ZeroDivisionError())
    assert said_as(SaltsError)(lambda: 42)() == 42


def test_a_pillar_that_did_not_compile_names_the_operators_problems():
    assert compiled({"kolla": {"settings": {}}}) == {"settings": {}}
    with pytest.raises(KollaError, match="did not compile: globals.yml: roles: expected a mapping; passwords.yml: "
                                         "mode 0644, expected 0600"):
        compiled({"kolla_problems": ["globals.yml: roles: expected a mapping", "passwords.yml: mode 0644, expected 0600"]})
    with pytest.raises(KollaError, match="no `kolla` key"):
        compiled({})
