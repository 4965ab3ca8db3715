"""What the tests share: fixtures, reference models, the loopback browser and Hub helpers."""
