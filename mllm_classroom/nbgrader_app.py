"""nbgrader's command line, with the sandboxed kernel manager when the grader asks for it.

    python -m mllm_classroom.nbgrader_app COMMAND ...   (what ``engine.nbgrader`` runs)

nbgrader's Execute step creates its kernel manager from one name in its module, and lets no
configuration replace it, so that name is replaced here, before nbgrader starts, when the grader has put
the sandbox's settings in the environment. The same step keeps at most ``OUTPUT_BYTES`` of the outputs of
one cell (and its error, which decides its points, always): a submission that prints without end costs
its own cell, not the grader's memory.
"""

import json
import os
import sys

OUTPUT_BYTES = 2 * 1024 * 1024


def capped(output):
    def output_capped(self, outs, msg, display_id, cell_index):
        sizes = self.__dict__.setdefault("_mllm_output_bytes", {})
        size = sizes.get(cell_index, 0) + len(json.dumps(msg.get("content", {}), default=str))
        sizes[cell_index] = size
        if size > OUTPUT_BYTES and msg.get("msg_type") != "error":  # an error decides the points: always kept
            cut = self.__dict__.setdefault("_mllm_cut_cells", set())
            if cell_index not in cut:
                from nbformat.v4 import new_output

                cut.add(cell_index)
                outs.append(new_output("stream", name="stderr", text=f"[output cut at {OUTPUT_BYTES} bytes]\n"))
            return None
        return output(self, outs, msg, display_id, cell_index)

    return output_capped


def main() -> None:
    from nbgrader.preprocessors import execute

    execute.Execute.output = capped(execute.Execute.output)
    if os.environ.get("MLLM_SANDBOX"):
        from mllm_classroom.sandbox import SandboxedKernelManager

        execute.AsyncKernelManager = SandboxedKernelManager  # read by Execute.__init__ at every kernel start
    from nbgrader.apps.nbgraderapp import main as nbgrader_main

    sys.argv = ["nbgrader", *sys.argv[1:]]
    nbgrader_main()


if __name__ == "__main__":
    main()
