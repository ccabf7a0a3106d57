"""The contributor rules of Arm's learning-paths repository, as data.

Read from ArmDeveloperEcosystem/arm-learning-paths (docs/upstream.md lists the files) and
written down here in our own words; nothing below is copied from that repository. The checks
that use these rules are in ``check.py``.
"""

from __future__ import annotations

import re

REPOSITORY = "ArmDeveloperEcosystem/arm-learning-paths"
CATEGORY = "servers-and-cloud-computing"

#: The path this one revises there ("Tune network workloads on Arm-based bare-metal instances"):
#: its directory, its pages' file names for the steps it has (a maintainer reviews a diff, not a
#: duplicate), and its authors, who stay authors. Steps it does not have keep our names.
UPSTREAM_SLUG = "tune-network-workloads-on-bare-metal"
UPSTREAM_PAGES = {"setup": "1_setup", "baseline": "2_baseline", "nic-queues": "3_nic-queue",
                  "numa": "4_local-numa", "iommu": "5_iommu", "summary": "6_summary"}
UPSTREAM_AUTHORS = "Ying Yu, Ker Liu, Rui Chang"
LAYOUT = "learningpathall"

#: Front matter every Learning Path's _index.md must carry (the union of the repository's
#: index-field checker and its front-matter audit guidance).
INDEX_REQUIRED = (
    "title", "description", "minutes_to_complete", "who_is_this_for", "learning_objectives",
    "prerequisites", "author", "skilllevels", "subjects", "armips", "tools_software_languages",
    "operatingsystems", "further_reading", "weight", "layout", "learning_path_main_page",
    "generate_summary_faq", "rerun_summary", "rerun_faqs",
)
#: Closed lists.
SKILL_LEVELS = frozenset({"Introductory", "Advanced"})
SUBJECTS = {
    "servers-and-cloud-computing": frozenset({
        "ML", "CI-CD", "Performance and Architecture", "Containers and Virtualization",
        "Databases", "Storage", "Web", "Libraries"}),
}
OPERATING_SYSTEMS = frozenset({"Linux", "Windows", "macOS", "ChromeOS", "iOS", "Android", "RTOS",
                               "Baremetal", "other"})
CLOUD_SERVICE_PROVIDERS = frozenset({"AWS", "Google Cloud", "Microsoft Azure", "Oracle"})
#: Arm IP is an open field, but the guidance asks for families, not CPU models or versions.
ARM_IP_FAMILIES = frozenset({"Neoverse", "Cortex-A", "Cortex-M", "Cortex-R", "Cortex-X", "Mali",
                             "Ethos", "Immortalis", "All"})
RESOURCE_TYPES = frozenset({"documentation", "blog", "website"})
LEARNING_OBJECTIVES = (3, 4)          # bullets, inclusive: the guidance asks for three or four
FURTHER_READING = (1, 6)              # the guidance asks for four to six; fewer is not refused
BOOLEAN_FIELDS = ("generate_summary_faq", "rerun_summary", "rerun_faqs")

#: _next-steps.md is a fixed stub: these fields, nothing to edit.
NEXT_STEPS_TITLE = "Next Steps"
NEXT_STEPS_FILE = "_next-steps.md"
INDEX_FILE = "_index.md"

#: Shortcodes the repository's theme defines (themes/arm-design-system-hugo-theme/layouts/
#: shortcodes) plus the Hugo built-ins its example path documents.
SHORTCODES = frozenset({
    "notice", "tabpane", "tabpane-normal", "tab", "godbolt", "highlight", "include-code",
    "load-plotly", "plotly", "sub", "super", "test", "test-report", "youtube-nocookie", "vimeo",
})

#: Images: the alt text is what precedes ``#center``; its audit wants 4 to 45 words, no
#: placeholder, no quotes, no "Figure N:" caption, and the file present.
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".svg", ".gif"})
ALT_WORDS = (4, 45)
ALT_PLACEHOLDER = re.compile(r"\b(alt[- ]?txt|alt[- ]?text|example image|placeholder)\b", re.I)
RASTER_MAX_KB = 200                   # larger PNG/JPEG files are resized to WebP by its tools

#: Signs of a path on the machine that built the pages (ours, not the repository's rule).
MACHINE_PATH = re.compile(
    r"(?<![\w.$~{])(/home/[\w.-]+|/root/|/Users/[\w.-]+|/tmp/[\w.-]+|/work/|/var/folders/)"
    r"|site-packages/|\.venv/|build/staging/")

#: Every exported page opens with this comment (ours: where its figures come from).
PROVENANCE = re.compile(r"<!-- tunepath export: (?P<text>.*?) -->")

#: Page size: the review guidance flags a page over this many words (prose, code blocks excluded).
PAGE_WORDS = 3500

#: ``minutes_to_complete`` is at least the time to read the path's prose at this pace (words a
#: minute, a common figure for technical text); running the steps on real hosts takes longer still.
READING_WPM = 200

#: The repository requires US English: British spellings a reviewer would flag (word stems).
BRITISH = re.compile(r"\b(behaviour|colour|favour|neighbour|labour|honour|centre|metre|litre|fibre|"
                     r"labelled|labelling|modelled|modelling|travelled|cancelled|"
                     r"optimis(?:e|ed|es|ing|ation)|utilis|initialis|serialis|normalis|organis|recognis|summaris|minimis|maximis|"
                     r"analyse|analysed|analysing|catalogue|licence|defence|grey|whilst|amongst)\w*", re.I)

#: Its image audit reads an image's target up to the first ")": a caption with parentheses
#: makes it look for a file that does not exist.
AUDIT_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]*)\)")

#: The path the export revises is theirs: its authors stay, and a page names it.
ATTRIBUTION = re.compile(r"Tune network workloads on Arm-based bare-metal instances")

