"""The reconstruction autoencoder of the PaRCE estimator: conv encoder g to a latent vector, mirrored decoder h.

Inputs and outputs are RGB tensors in [0, 1] at `image_size`; the decoder ends in a sigmoid so that the
reconstruction (the Reco counterfactual) is a valid image (the reference's ReLU decoder exceeds 1).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn


class ConvAutoencoder(nn.Module):
    def __init__(self, image_size: int, channels: tuple[int, ...] | list[int], latent_dim: int,
                 in_channels: int = 3) -> None:
        super().__init__()
        self.image_size, self.channels, self.latent_dim = int(image_size), tuple(channels), int(latent_dim)
        self.in_channels = int(in_channels)
        side = self.image_size // 2 ** len(self.channels)
        self._bottleneck = (self.channels[-1], side, side)
        flat = self.channels[-1] * side * side

        enc: list[nn.Module] = []
        prev = self.in_channels
        for c in self.channels:
            enc += [nn.Conv2d(prev, c, 3, stride=2, padding=1), nn.ReLU()]
            prev = c
        self.encoder = nn.Sequential(*enc, nn.Flatten(), nn.Linear(flat, self.latent_dim))

        dec: list[nn.Module] = []
        outs = list(reversed(self.channels[:-1])) + [self.in_channels]
        prev = self.channels[-1]
        for i, c in enumerate(outs):
            dec.append(nn.ConvTranspose2d(prev, c, 4, stride=2, padding=1))
            dec.append(nn.Sigmoid() if i == len(outs) - 1 else nn.ReLU())
            prev = c
        self.decoder_fc = nn.Sequential(nn.Linear(self.latent_dim, flat), nn.ReLU())
        self.decoder = nn.Sequential(*dec)

    @classmethod
    def from_architecture(cls, arch: Mapping[str, Any]) -> "ConvAutoencoder":
        if arch.get("kind") != "conv-autoencoder/v1":
            raise ValueError(f"unknown autoencoder architecture {arch.get('kind')!r}")
        return cls(arch["image_size"], arch["channels"], arch["latent_dim"], arch.get("in_channels", 3))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """g: (N, 3, S, S) in [0, 1] -> (N, latent_dim)."""
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """h: (N, latent_dim) -> (N, 3, S, S) in [0, 1]."""
        return self.decoder(self.decoder_fc(z).view(-1, *self._bottleneck))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))
