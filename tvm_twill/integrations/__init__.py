"""tvm_twill inside TVM's own tools: ``dlight`` (a rule wrapper that re-plans the pipelines dlight writes),
``metaschedule`` (the ``TwillPipeline`` postprocessor and tuning helpers), ``modules`` (``plan_module``:
every pipeline of an IRModule, solved in parallel by ``workers``) and ``module_report`` (its summary).
The public paths ``tvm_twill.dlight`` and ``tvm_twill.metaschedule`` stay importable.  docs/integrations.md."""
