"""Where state lives: implementations of the engine's store port."""
