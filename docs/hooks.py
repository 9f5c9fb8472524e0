"""MkDocs hooks: links from the docs to repository files outside ``docs/`` (committed results,
figures, benchmarks) are checked and made to work in the site.

MkDocs resolves links only among the files of ``docs_dir``; a link such as
``../results/studies/learning/curves.png`` would be a broken link in the built site (and a
warning, which ``--strict`` turns into a failure, for Markdown targets).  Written here because
no MkDocs plugin maps links to files outside ``docs_dir`` while checking that they exist.

- a link to a repository file or folder that does not exist fails the build;
- a link to a non-Markdown file (a figure, a CSV, a JSON report) copies that file into the site
  under ``repo/`` and points there;
- a link to a Markdown file or a folder becomes a link to it in the repository when the config
  has a ``repo_url``, else its repository path in code (the site never holds a broken link).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

LINK = re.compile(r"(!?\[[^\]]*\])\(([^()\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def _outside_targets(page_src: str, text: str, docs: Path, root: Path):
    """(match, repository-relative path, fragment) of each link that leaves docs/ for the repo."""
    fenced = [m.span() for m in FENCE.finditer(text)]
    for m in LINK.finditer(text):
        if any(a <= m.start() < b for a, b in fenced):
            continue
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue
        path, _, fragment = target.partition("#")
        resolved = (docs / posixpath.dirname(page_src) / path).resolve()
        try:
            resolved.relative_to(docs)
            continue  # inside docs/: MkDocs checks it
        except ValueError:
            pass
        try:
            rel = resolved.relative_to(root).as_posix()
        except ValueError as exc:
            raise PluginError(f"{page_src}: link {target!r} leaves the repository") from exc
        if not resolved.exists():
            raise PluginError(f"{page_src}: link to {rel}, which does not exist in the repository")
        yield m, rel, fragment, resolved


def _roots(config) -> tuple[Path, Path]:
    docs = Path(config["docs_dir"]).resolve()
    return docs, docs.parent


def on_files(files, config):
    docs, root = _roots(config)
    wanted: dict[str, Path] = {}
    for page in files.documentation_pages():
        for _m, rel, _frag, resolved in _outside_targets(page.src_uri, page.content_string, docs, root):
            if resolved.is_file() and resolved.suffix != ".md":
                wanted[rel] = resolved
    for rel, resolved in sorted(wanted.items()):
        files.append(File.generated(config, f"repo/{rel}", abs_src_path=str(resolved)))
    return files


def on_page_markdown(markdown, page, config, files):
    docs, root = _roots(config)
    repo_url = (config.get("repo_url") or "").rstrip("/")
    out, last = [], 0
    for m, rel, fragment, resolved in _outside_targets(page.file.src_uri, markdown, docs, root):
        out.append(markdown[last : m.start()])
        label = m.group(1)
        if resolved.is_file() and resolved.suffix != ".md":
            here = posixpath.dirname(page.file.src_uri)
            link = posixpath.relpath(f"repo/{rel}", here or ".")
            out.append(f"{label}({link}{'#' + fragment if fragment else ''})")
        elif repo_url:
            kind = "blob" if resolved.is_file() else "tree"
            out.append(f"{label}({repo_url}/{kind}/HEAD/{rel}{'#' + fragment if fragment else ''})")
        else:
            text = label.lstrip("!")[1:-1]
            out.append(text if f"`{rel}`" in text or text == rel else f"{text} (`{rel}`)")
        last = m.end()
    out.append(markdown[last:])
    return "".join(out)
