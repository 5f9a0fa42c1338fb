import pytest


@pytest.fixture(scope="session")
def paper_models():
    pytest.importorskip("torch")
    from fixtures_tiny import cmnist_world as world

    a = world.CNNClassifier(world.train_cnn(world.paper_bias("A"), epochs=6), "A")
    b = world.CNNClassifier(world.train_cnn(world.paper_bias("B"), epochs=6), "B")
    world.require_bias(a, low=[(3, "green"), (1, "cyan")], high=[(3, "red"), (7, "green")])
    world.require_bias(b, low=[(7, "green"), (8, "pink")], high=[(7, "blue"), (3, "green")])
    return a, b
