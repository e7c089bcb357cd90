"""One evaluation, stage by stage: screen -> build -> run and compare -> time -> audit -> reward.

``evaluator`` holds the stage order; the other modules are the stages and the values they produce."""
