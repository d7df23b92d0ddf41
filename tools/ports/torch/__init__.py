"""PyTorch ports of the shipped goldens' programs, written as a team porting them would."""
