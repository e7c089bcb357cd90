"""One evaluation, stage by stage: screen -> build -> run and compare -> time -> audit -> reward.

``evaluator`` holds the stage order; ``context`` what the stages share (none takes the Evaluator); the other modules
are the stages and the values they produce."""
