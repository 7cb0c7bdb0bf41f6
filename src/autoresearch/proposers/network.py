"""`[proposer] network` and `allow_hosts`: what the commands of a proposer may reach.

    network = "on"      # any host (the default; `check` and the start say so)
    network = "off"     # nothing: a network namespace of its own
    network = "allow"   # only allow_hosts, through the engine's proxy (isolation/proxy.py)
    allow_hosts = ["api.anthropic.com", "127.0.0.1:8080"]   # no port: 443

The keys belong to the kinds that run commands (`command` and the agent presets); an agent
preset brings its model API's hosts when `allow_hosts` is left out.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from autoresearch.errors import ConfigError
from autoresearch.isolation.confinement import Confinement, require_sandbox
from autoresearch.isolation.proxy import NetworkMode, ProposerNetwork, network_of, parse_allowed

MAX_HOSTS = 256
ANY_HOST_WARNING = (
    'the proposer can reach any host ([proposer] network = "on"): whatever it reads, the '
    'workspace included, it can send anywhere; set network = "allow" with allow_hosts to '
    "let it reach only its model's API"
)


class NetworkOptions(BaseModel):
    network: NetworkMode = "on"
    allow_hosts: list[str] = Field(default_factory=list, max_length=MAX_HOSTS)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if value and info.data.get("network", "on") != "allow":
            raise ValueError(
                'lists hosts, which only network = "allow" uses; set it or remove the list'
            )
        for entry in value:
            parse_allowed(entry)
        return value


def proposer_network(
    options: NetworkOptions,
    confinement: Confinement,
    source: str,
    defaults: tuple[str, ...] = (),
    who: str = "the proposer",
) -> ProposerNetwork:
    """The network the options ask for, refused when it cannot hold: "off" or "allow"
    without a sandbox, "allow" with no hosts to allow."""
    hosts = options.allow_hosts or list(defaults)
    if options.network == "allow" and not hosts:
        raise ConfigError(
            f"{source}: key 'proposer.allow_hosts': network = \"allow\" needs the hosts "
            f'{who} may reach (its model\'s API, as "api.example.com" or "host:port"); '
            "list them."
        )
    network = network_of(options.network, hosts)
    require_sandbox(network, confinement, source)
    return network
