"""GPU memory calculator and the model/GPU specs it reads."""
