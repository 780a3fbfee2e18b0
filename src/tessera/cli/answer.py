"""``tessera answer`` and ``tessera verify``: publish a workload's answers under a budget, and
check a release certificate from the workload alone (docs/theory.md §3, §7, §9)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import (
    Command,
    CountOpt,
    DataArg,
    DelimiterOpt,
    DeltaOpt,
    EngineOpt,
    ExtraColumnsOpt,
    LabelOpt,
    MaxRowsOpt,
    NaOpt,
    NeighboursOpt,
    NoHeaderOpt,
    OnInvalidOpt,
    PrivacyIdOpt,
    RhoOpt,
    SchemaOpt,
    SeedOpt,
    SkipRowsOpt,
    SparkMasterOpt,
    TableOpt,
    WorkloadArg,
    check_policies,
    csv_options,
    data_source,
    err,
    info,
    out,
    privacy_unit,
    spent_text,
    user_errors,
)
from tessera.cli.synth import looks_like_run_record, verify_run
from tessera.errors import TesseraError


def register(app: typer.Typer) -> None:
    app.command("answer", cls=Command)(answer)
    app.command("verify", cls=Command)(verify)


@user_errors
def answer(
    data: DataArg,
    workload: WorkloadArg,
    schema: SchemaOpt,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", "-e", help="Pure ε-DP (discrete Laplace), or "
                                   "(ε,δ)-DP with --delta (discrete Gaussian).")
    ] = None,
    delta: DeltaOpt = None,
    rho: RhoOpt = None,
    mu: Annotated[
        float | None, typer.Option("--mu", help="μ-GDP target (discrete Gaussian at ρ = μ²/2; "
                                   "the certificate states what is proven).")
    ] = None,
    neighbours: NeighboursOpt = "add-remove",
    privacy_id: PrivacyIdOpt = None,
    max_rows: MaxRowsOpt = None,
    count: CountOpt = None,
    weights: Annotated[
        str, typer.Option("--weights", help="How the budget is split over the queries: auto "
                          "(predicate queries of one weight: optimal; else shares), optimal "
                          "(least total variance), uniform, shares (∝ weight) or importance "
                          "(least Σ weight·variance).")
    ] = "auto",
    strategy: Annotated[
        str, typer.Option("--strategy", help="What to measure: auto (least expected error), "
                          "direct, identity, residual or hierarchical; W's answers are "
                          "reconstructed by least squares.")
    ] = "auto",
    objective: Annotated[
        str, typer.Option("--objective", help="Expected error the strategy minimises: total "
                          "(Σ w·Var) or max (max w·Var).")
    ] = "total",
    estimate: Annotated[
        str, typer.Option("--estimate", help="gls (unbiased least squares, with intervals), "
                          "model (adds non-negative, consistent estimates from every "
                          "measurement, GReM-LNN; marginal workloads; no proven interval) or "
                          "adaptive (the budget spent on the adaptive synthesizer's "
                          "select-measure-fit loop, every answer read from its fitted model; "
                          "no proven interval).")
    ] = "gls",
    accept_cost: Annotated[
        bool, typer.Option("--accept-cost", help="With --estimate adaptive: run a workload "
                           "whose estimated cost is refused by default (more than 4 queries "
                           "read by engine passes beside the model; the refusal says what it "
                           "will cost).")
    ] = False,
    consistency: Annotated[
        bool, typer.Option("--consistency", help="Add least-squares consistent answers "
                           "(post-processing, free).")
    ] = False,
    nonnegative: Annotated[
        bool, typer.Option("--nonnegative", help="Add answers clipped at 0 and rounded "
                           "(post-processing, free, biased).")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Answers: .csv or .parquet.")
    ] = None,
    certificate: Annotated[
        Path | None, typer.Option("--certificate", help="Write the release certificate (JSON).")
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Write a self-contained HTML report.")
    ] = None,
    ledger: Annotated[
        Path | None, typer.Option("--ledger", help="Budget ledger to charge before release "
                                  "(tessera ledger init).")
    ] = None,
    label: LabelOpt = None,
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="Seconds per overlap solve (past it, a proven "
                            "upper bound calibrates).")
    ] = 60.0,
    seed: SeedOpt = None,
    on_invalid: OnInvalidOpt = "error",
    extra_columns: ExtraColumnsOpt = "error",
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    table: TableOpt = None,
    engine: EngineOpt = "duckdb",
    spark_master: SparkMasterOpt = "local[*]",
) -> None:
    """Answer WORKLOAD on DATA under a privacy budget: noisy answers, certificate, report.

    Without -o the answers go to stdout as CSV; the budget, mechanism, guarantees and ledger
    charge always go to stderr."""
    from tessera.release.answering import answer as private_answer
    from tessera.release.budget import Budget
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    check_policies(on_invalid, extra_columns)
    budget = Budget.of(epsilon=epsilon, delta=delta, rho=rho, mu=mu)
    unit = privacy_unit(privacy_id, max_rows, count)
    if accept_cost and estimate != "adaptive":
        raise TesseraError("--accept-cost goes with --estimate adaptive")
    if estimate == "adaptive":
        _refuse_with_adaptive(weights=weights != "auto", strategy=strategy != "auto",
                              objective=objective != "total", consistency=consistency,
                              nonnegative=nonnegative, report=report is not None)
    from tessera.workload.select import is_aggregate_file

    if is_aggregate_file(workload):
        _answer_aggregates(data, workload, schema, budget, neighbours, unit, ledger, label,
                           time_limit, seed, csv_options(no_header, delimiter, na, skip_rows),
                           table, on_invalid, extra_columns, output, certificate,
                           engine, spark_master, consistency, strategy,
                           ignored={"--weights": weights != "auto",
                                    "--objective": objective != "total",
                                    "--estimate": estimate != "gls",
                                    "--nonnegative": nonnegative,
                                    "--report": report is not None})
        return
    w = Workload.load(workload, Domain.load(schema))
    source = data_source(data, engine, spark_master)
    if estimate == "adaptive":
        from tessera.routes.adaptive import answer_adaptive

        with info.status(f"answering {w.n_queries:,} queries from an adaptive model…",
                        spinner="dots"):
            model = answer_adaptive(
                source, w, budget, neighbours=neighbours, unit=unit, ledger=ledger,
                label=label or workload.stem, seed=seed,
                csv=csv_options(no_header, delimiter, na, skip_rows), table=table,
                on_invalid=on_invalid, extra_columns=extra_columns,  # type: ignore[arg-type]
                output=output, certificate=certificate, accept_cost=accept_cost,
                notice=lambda text: info.print(text, markup=False, highlight=False))
        _print_model_release(model, output, certificate)
        return
    steps = tuple(s for s, on in (("consistency", consistency), ("nonnegative", nonnegative))
                  if on)
    with info.status(f"answering {w.n_queries:,} queries…", spinner="dots"):
        release = private_answer(
            source, w, budget, neighbours=neighbours, unit=unit,
            allocation=weights,  # type: ignore[arg-type]
            postprocess=steps, strategy=strategy, objective=objective, estimate=estimate,
            ledger=ledger,
            label=label or workload.stem,
            time_limit=time_limit, seed=seed, csv=csv_options(no_header, delimiter, na, skip_rows),
            table=table, on_invalid=on_invalid, extra_columns=extra_columns,  # type: ignore[arg-type]
            output=output, certificate=certificate, report=report,
        )
    _print_release(release)
    for what, path in (("answers", output), ("certificate", certificate), ("report", report)):
        if path is not None:
            info.print(f"{what + ':':<12} {path}", markup=False, highlight=False)
    if output is None:  # like `count`: the answers alone on stdout, as CSV (pipe them)
        from tessera.release.output import write_csv

        sys.stdout.flush()
        write_csv(release, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _answer_aggregates(data: Path, workload: Path, schema: Path, budget: object,
                       neighbours: str, unit: object, ledger: Path | None, label: str | None,
                       time_limit: float, seed: int | None, csv: object, table: str | None,
                       on_invalid: str, extra_columns: str, output: Path | None,
                       certificate: Path | None, engine: str, spark_master: str,
                       consistency: bool, strategy: str, ignored: dict[str, bool]) -> None:
    """A workload of SELECT statements: :func:`tessera.release.aggregates.answer_aggregates`,
    the budget and guarantee on stderr, the rows on stdout (CSV) without -o."""
    from tessera.release.aggregates import answer_aggregates
    from tessera.schema.domain import Domain
    from tessera.workload.select import read_aggregates

    bad = [flag for flag, on in ignored.items() if on]
    if bad:
        raise TesseraError(f"{', '.join(bad)} cannot be used with aggregate statements",
                           hint="a workload of SELECT statements is answered directly or "
                                "through --strategy: drop the option")
    w = read_aggregates(workload, Domain.load(schema))
    release = answer_aggregates(
        data_source(data, engine, spark_master), w, budget,  # type: ignore[arg-type]
        neighbours=neighbours, unit=unit,  # type: ignore[arg-type]
        ledger=ledger, label=label or workload.stem, time_limit=time_limit, seed=seed,
        csv=csv, table=table, on_invalid=on_invalid,  # type: ignore[arg-type]
        extra_columns=extra_columns, output=output, certificate=certificate,  # type: ignore[arg-type]
        consistency=consistency, strategy=strategy)
    plan = release.plan
    if not release.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed); never publish")
    info.print(f"budget: {plan.budget.text()}, {plan.unit.label(plan.neighbours)} neighbours",
               markup=False)
    if plan.unit.counts_people:
        info.print(f"unit of privacy: {plan.unit.text} — each person's rows bounded to "
                   f"{plan.unit.max_rows}; every group counts distinct people and sums each "
                   "person's total there, clamped once, so a person pays the coverage of "
                   f"{plan.unit.max_rows} records (weights: 1 a count, max(|lo|, |hi|) a sum)",
                   markup=False)
    if strategy != "direct" and plan.unit.counts_people:
        info.print("strategy: direct (counting people, every group is measured as it is: a "
                   "count or sum of persons is not the sum of its parts')", markup=False)
    elif strategy != "direct" and not hasattr(plan, "families"):
        info.print("strategy: direct (no summed quantity's queries have a strategy of lower "
                   "expected error" + (", or --consistency" if consistency else "") + ")",
                   markup=False)
    info.print(f"aggregates: {len(w.statements):,} statements, {len(plan.linear):,} linear "
               f"queries (counts and clamped sums); mechanism {plan.mechanism}", markup=False)
    for fam in getattr(plan, "families", ()):  # a strategy release: each summed quantity's
        cands = ", ".join(f"{n} {t:.4g}" for n, t in fam.expected)
        info.print(f"strategy: {fam.family.label}: {fam.name} ({len(fam.measured):,} measured "
                   f"queries; expected Σ Var: {cands})", markup=False, highlight=False)
    info.print(f"guarantee: {release.certificate['spent']['guarantee']}; spend "
               f"{'exact' if plan.spent.exact else 'upper bound'}", markup=False,
               highlight=False)
    if consistency:
        n_eq = release.frame.attrs.get("consistency_equalities", 0)
        info.print(f"consistency: least-squares answers under {n_eq:,} equalities between "
                   "nested statements (post-processing, no privacy cost; intervals by the "
                   "normal approximation)" if n_eq else "consistency: no two statements nest "
                   "(same WHERE, nested GROUP BY): the consistent answers are the noisy ones",
                   markup=False)
    if release.charge is not None:
        info.print(f"ledger: charged before release; spent {spent_text(release.charge)} "
                   "(rounded up)", markup=False)
    for what, path in (("answers", output), ("certificate", certificate)):
        if path is not None:
            info.print(f"{what + ':':<12} {path}", markup=False, highlight=False)
    if output is None:
        from tessera.release.aggregates import write_frame

        sys.stdout.flush()
        write_frame(release, sys.stdout)
        sys.stdout.flush()


def _refuse_with_adaptive(**given: bool) -> None:
    """``--estimate adaptive`` measures what the synthesizer selects and answers from its
    model: a strategy, a split, post-processing steps or the report do not apply."""
    flags = {"weights": "--weights", "strategy": "--strategy", "objective": "--objective",
             "consistency": "--consistency", "nonnegative": "--nonnegative",
             "report": "--report"}
    bad = [flags[k] for k, on in given.items() if on]
    if bad:
        raise TesseraError(f"{', '.join(bad)} cannot be used with --estimate adaptive",
                           hint="the adaptive route selects what to measure itself and answers "
                                "from its model (already consistent and ≥ 0); drop the "
                                "option, or use --estimate gls|model")


def _print_model_release(model: object, output: Path | None, certificate: Path | None) -> None:
    """On stderr: the run (mechanisms, spend), what the answers are, the ledger charge and the
    files; without -o the answers on stdout as CSV."""
    from tessera.routes.adaptive import ModelRelease
    from tessera.routes.model_files import write_answers_csv

    assert isinstance(model, ModelRelease)
    if not model.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed); never publish")
    info.print(model.describe(), markup=False, highlight=False)
    if model.charge is not None:
        info.print(f"ledger: charged before release; spent {spent_text(model.charge)} (rounded "
                  "up)", markup=False)
    for what, path in (("answers", output), ("certificate", certificate)):
        if path is not None:
            info.print(f"{what + ':':<12} {path}", markup=False, highlight=False)
    if output is None:
        sys.stdout.flush()
        write_answers_csv(model, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _print_release(release: object) -> None:
    """On stderr: what was released and its guarantees, figures rounded for people (budgets
    spent rounded up; the exact values are in the certificate)."""
    from tessera.release.answering import Release

    assert isinstance(release, Release)
    plan = release.plan
    if not release.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed); never publish")
    ov = plan.overlap
    info.print(f"budget: {plan.budget.text()}, {plan.unit.label(plan.neighbours)} neighbours",
              markup=False)
    if plan.unit.counts_people:
        info.print(f"unit of privacy: {plan.unit.text} — each person's rows bounded to "
                  f"{plan.unit.max_rows} (by a hash of each row); every answer counts distinct "
                  "people (a person at most once per query), so a person pays the coverage of "
                  f"{plan.unit.max_rows} rows (γ_w below), never more than "
                  f"{plan.unit.max_rows} × a row", markup=False)
    elif not plan.unit.is_row:
        k, factor = plan.unit.max_rows, plan.unit.factor(plan.budget.calibration)
        info.print(f"unit of privacy: {plan.unit.text} — each person's rows bounded to {k} "
                  f"(by a hash of each row); a person pays {factor} × a row, so the noise is "
                  f"{k} × a row-level release's", markup=False)
    info.print(f"mechanism: {release.mechanism.describe()}", markup=False)
    info.print(f"γ_w = {ov.bound:.6g} ({'exact' if ov.exact else 'upper bound'}), "
              f"{plan.workload.n_queries:,} queries, allocation {plan.method}", markup=False)
    if release.strategy is not None:
        st = release.strategy.choice.chosen
        info.print(f"strategy: {st.name} ({st.measured.n_queries:,} measured queries, "
                  f"answers by {st.reconstruction.name})", markup=False)
    for g in plan.guarantees():
        info.print(f"guarantee: {g.text()}", markup=False, highlight=False)
    if release.charge is not None:
        c = release.charge
        info.print(f"ledger: charged before release; spent {spent_text(c)} (rounded up)",
                  markup=False)


@user_errors
def verify(
    certificate: Annotated[
        Path, typer.Argument(help="Certificate JSON written by tessera answer, or a run "
                             "record written by tessera synth --record.",
                             metavar="CERTIFICATE", exists=True)
    ],
    workload: WorkloadArg,
    schema: SchemaOpt,
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="Seconds per overlap solve.")
    ] = 60.0,
) -> None:
    """Recompute a certificate's accounting (or re-prove a synthesis run's spend from its record)
    from the schema and workload alone (no data)."""
    from tessera.release.certificate import read_certificate, verify_certificate
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    if looks_like_run_record(certificate):
        verify_run(certificate, workload, schema)
        return
    from tessera.release.aggregate_certificate import read_aggregate_certificate
    from tessera.release.sum_strategy import verify_release

    doc = read_aggregate_certificate(certificate)
    if doc is not None:
        from tessera.workload.select import read_aggregates

        diffs = verify_release(doc, read_aggregates(workload, Domain.load(schema)),
                               time_limit=time_limit)
        if diffs:
            raise TesseraError(
                f"{certificate}: the certificate does NOT check out ({len(diffs)} "
                "difference(s)):\n" + "\n".join(f"  {d}" for d in diffs))
        out.print(f"{certificate}: verified — the spend re-derived from the scales is within "
                  f"the budget ({doc['workload']['linear_queries']} linear queries, workload "
                  f"sha256 {doc['workload']['sha256'][:12]}…)", markup=False)
        return
    doc = read_certificate(certificate)
    result = verify_certificate(doc, Workload.load(workload, Domain.load(schema)),
                                time_limit=time_limit)
    if not result.ok:
        raise TesseraError(
            f"{certificate}: the certificate does NOT check out ({len(result.differences)} "
            "difference(s)):\n" + "\n".join(f"  {d}" for d in result.differences)
        )
    out.print(f"{certificate}: verified — every recomputed field matches "
              f"({doc['workload']['queries']} queries, workload sha256 "
              f"{doc['workload']['sha256'][:12]}…)", markup=False)
