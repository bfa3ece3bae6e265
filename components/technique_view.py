"""A technique's page: principle, gain, knobs per engine, checklist, verify, side effects, sources."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import session
from components.shell import knowledge, lang, t
from triage.service.knowledge import (
    LEVEL_ORDER,
    PublishedGain,
    Technique,
    default_text,
    flag_text,
    paper_url,
    versions_line,
)

DIAGNOSE_PAGE = "pages/diagnose.py"
# The knob table fits its column: at 1024 px a flag ("cudagraph_mode=FULL_DECODE_ONLY") and a JSON example in a
# meaning never broke, the table grew to ~750 px in ~560 and the meanings ran out of sight behind a sideways
# scroll. Fixed columns (flag 30 %, default 20 %, meaning 50 %) whose long words break anywhere.
_FIT_KNOBS = (f"<style>.st-key-{session.TECH_KNOBS.name} table {{ table-layout: fixed; width: 100%; }}"
              f".st-key-{session.TECH_KNOBS.name} :is(th, td, th *, td *) {{ overflow-wrap: anywhere !important;"
              " white-space: normal !important; }"
              f".st-key-{session.TECH_KNOBS.name} tr > :nth-child(1) {{ width: 30%; }}"
              f".st-key-{session.TECH_KNOBS.name} tr > :nth-child(2) {{ width: 20%; }}</style>")


def _gain(tech: Technique) -> None:
    st.markdown(f"#### {t('expected_gain')}")
    st.markdown(f"**{t('seed_says')}:** {tech.expected_gain.seed.get(lang())}")
    if tech.expected_gain.published:
        st.markdown(f"**{t('published')}:**")
        st.markdown("\n".join(f"- {g.claim.get(lang())} — *{g.source}*{_cite(g)}"
                               for g in tech.expected_gain.published))


def _cite(gain: PublishedGain) -> str:
    links = [f"[{ref}]({paper_url(ref)})" for ref in gain.papers]
    if not links and gain.url:
        links = [f"[{t('source_link')}]({gain.url})"]
    return " · " + ", ".join(links) if links else ""


def _knobs(tech: Technique) -> None:
    st.markdown(f"#### {t('knobs')}")
    st.caption(t("flags_as_of", versions=versions_line(tech.verified, t("version_sep"))))
    kb = knowledge()
    maps = kb.engines  # tab names and status lines come from tree/engines/<id>.yaml
    engines = [e for e in kb.serving if e in tech.knobs]  # the serving engines this technique gives knobs for
    st.html(_FIT_KNOBS)
    box = st.container(key=session.TECH_KNOBS.name)  # the tabs inside it: their tables take _FIT_KNOBS
    for tab, engine in zip(box.tabs([maps[e].title for e in engines]), engines):
        knobs = tech.knobs[engine]
        status = maps[engine].status if engine in maps else None
        with tab:
            if status is not None:
                st.info(status.get(lang()))
            st.markdown(f"**{t('on_by_default')}** {knobs.on_by_default.get(lang())}")
            if knobs.flags:
                rows = [{t("flag"): flag_text(f, lang()), t("default"): default_text(f, lang()),
                         t("meaning"): f.meaning.get(lang())} for f in knobs.flags]
                st.table(pd.DataFrame(rows).set_index(t("flag")))  # a static table wraps long meanings
            else:
                st.caption(t("no_flags"))
            if knobs.example.strip():
                st.code(knobs.example.strip(), language="bash")


def _checklist(tech: Technique) -> None:
    st.markdown(f"#### {t('checklist')}")
    for i, step in enumerate(tech.checklist):
        label = f"**[{t('level_' + step.level)}]** {step.change.get(lang())}"
        st.checkbox(label, key=session.TECH_CHECK.key(tech.id, i), persist_state="session",
                    help=f"{t('measure')}: {step.measure.get(lang())}")
        st.caption(f"↳ {t('measure')}: {step.measure.get(lang())}")
    total = len(tech.checklist)
    done = sum(bool(session.TECH_CHECK.value(tech.id, i)) for i in range(total))
    st.progress(done / total, text=t("checklist_progress", done=done, total=total))


def _verify(tech: Technique) -> None:
    st.markdown(f"#### {t('verify')}")
    st.markdown(f"**{t('benchmark')}:** {tech.verify.benchmark.get(lang())}")
    st.markdown(f"**{t('must_improve')}:** {tech.verify.must_improve.get(lang())}")
    st.markdown(f"**{t('must_not_regress')}:** {tech.verify.must_not_regress.get(lang())}")


def _cautions(tech: Technique) -> None:
    left, right = st.columns(2)
    with left:
        st.markdown(f"#### {t('side_effects')}")
        st.markdown("\n".join(f"- {s.get(lang())}" for s in tech.side_effects))
    with right:
        st.markdown(f"#### {t('when_not_to_use')}")
        st.markdown("\n".join(f"- {s.get(lang())}" for s in tech.when_not_to_use))


def _sources(tech: Technique) -> None:
    st.markdown(f"#### {t('sources')}")
    st.markdown("\n".join(f"- [{s.title}]({s.url})" if s.url else f"- {s.title}" for s in tech.sources))


def _reached_from(tech: Technique) -> None:
    kb = knowledge()
    st.markdown(f"#### {t('reached_from')}")
    for cause in kb.causes_reaching(tech.id):
        sym = kb.symptom_of(cause.id)
        st.page_link(DIAGNOSE_PAGE, label=f"{sym.short.get(lang())} → {cause.title.get(lang())}",
                     icon=":material/account_tree:", query_params={"node": cause.id, "lang": lang()})


def technique_view(tech: Technique) -> None:
    """Everything the technique's YAML says, in the same order on every page."""
    st.title(tech.title.get(lang()))
    # the source's chapter numbers refer to a book the user does not hold, so they are not shown
    st.caption(f"{t('level')}: **{t('level_' + tech.level)}** · `{tech.id}`")
    st.markdown(f"#### {t('principle')}")
    st.write(tech.principle.get(lang()))
    st.markdown(f"**{t('bottleneck')}:** {tech.bottleneck.get(lang())}")
    _gain(tech)
    _knobs(tech)
    _checklist(tech)
    _verify(tech)
    _cautions(tech)
    _sources(tech)
    _reached_from(tech)


def technique_index() -> None:
    """All techniques, in the order to try them (config → model → architecture)."""
    kb = knowledge()
    st.title(t("technique_index"))
    st.caption(t("technique_index_hint"))
    ordered = sorted(kb.techniques.values(), key=lambda x: LEVEL_ORDER[x.level])
    for tech in ordered:
        st.page_link("pages/technique.py", label=f"{tech.title.get(lang())} · {t('level_' + tech.level)}",
                     query_params={"id": tech.id, "lang": lang()})
