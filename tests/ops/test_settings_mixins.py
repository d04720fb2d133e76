"""Each topic's settings mixin keeps its own validators: pydantic keeps one validator per name
(the first base's), so two mixins with a `_blank_is_none` each left one topic's blank values
unchecked (`PARLEY_TITLE_MODEL=` read as the model named "")."""

from __future__ import annotations

from collections import Counter

from app.settings import Settings


def _validators(cls: type) -> set[str]:
    decorators = cls.__dict__.get("__pydantic_decorators__")
    if decorators is None:
        return set()
    return set(decorators.field_validators) | set(decorators.model_validators)


def test_no_two_settings_classes_share_a_validator_name() -> None:
    names: Counter[str] = Counter()
    for mixin in Settings.__bases__:
        names.update(_validators(mixin))
    inherited = set().union(*(_validators(m) for m in Settings.__bases__))
    names.update(_validators(Settings) - inherited)  # the core settings' own
    assert [name for name, count in names.items() if count > 1] == []


def test_blank_choices_of_every_topic_are_unset() -> None:
    blank = Settings(title_provider=" ", title_model="", default_provider="")
    assert (blank.title_provider, blank.title_model, blank.default_provider) == (None, None, None)
