"""A base for objects rebuilt from their configuration (model.save)."""


class Configurable:
    """get_config() gives {"class": name, argument: value, ...};
    from_config rebuilds the object; repr shows the arguments."""

    def get_config(self) -> dict:
        return {"class": type(self).__name__}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        name = config.pop("class", cls.__name__)
        if name != cls.__name__:
            raise ValueError(f"[{cls.__name__}.from_config] the config describes a {name}")
        return cls(**config)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "class")
        return f"{type(self).__name__}({items})"
