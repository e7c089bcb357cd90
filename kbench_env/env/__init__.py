"""The Gymnasium side: the environment class, its vector form, and the prompt a policy reads."""
