"""TF2 ports of the corpus programs, as a team would write them today. Each module's
`port(tf)` returns (model or variables, step function, extra replay keywords)."""
