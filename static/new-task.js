// The New task page (templates/tasks/new.html): shows the inputs of the chosen agent and
// model kind only, and checks the workspace files before the form is sent: a request over
// the server's bounds (too many files, too large) would be refused whole, and everything
// typed in it lost. The server checks the same bounds again (dashboard/new_task_files.py).
(function () {
  "use strict";

  function show(form) {
    var agent = form.querySelector("[name=agent]").value;
    var kind = form.querySelector("[name=model_kind]").value;
    var loop = agent === "loop";
    var sdk = agent.indexOf("openai-agents:") === 0 || agent.indexOf("pydantic-ai:") === 0;
    var parts = {
      loop: loop,
      model: (loop && kind === "openai") || sdk,
      script: loop && kind === "scripted",
      agent: !loop && agent !== "other",
    };
    form.querySelectorAll("[data-agent-part]").forEach(function (el) {
      el.hidden = !parts[el.getAttribute("data-agent-part")];
    });
  }

  function bytes(text) {
    return new Blob([text]).size;
  }

  function filesProblem(form) {
    var maxFiles = Number(form.dataset.maxFiles);
    var maxFile = Number(form.dataset.maxFileBytes);
    var maxTotal = Number(form.dataset.maxTotalBytes);
    var uploads = form.querySelector("[name=upload]").files;
    if (uploads.length > maxFiles) {
      return uploads.length + " files chosen; at most " + maxFiles + " at a time";
    }
    var total = 0;
    for (var i = 0; i < uploads.length; i++) {
      if (uploads[i].size > maxFile) {
        return uploads[i].name + " is " + uploads[i].size + " bytes; at most " + maxFile;
      }
      total += uploads[i].size;
    }
    var pasted = form.querySelectorAll("[name=file_content]");
    for (var j = 0; j < pasted.length; j++) {
      var size = bytes(pasted[j].value);
      if (size > maxFile) return "a pasted file is " + size + " bytes; at most " + maxFile;
      total += size;
    }
    if (total > maxTotal) return "the files hold " + total + " bytes; at most " + maxTotal + " in all";
    return "";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form.new-task");
    if (!form) return;
    form.querySelectorAll("[name=agent], [name=model_kind]").forEach(function (el) {
      el.addEventListener("change", function () { show(form); });
    });
    show(form);
    form.addEventListener("submit", function (event) {
      var note = form.querySelector("[data-testid=files-check]");
      var problem = filesProblem(form);
      note.textContent = problem;
      note.hidden = !problem;
      if (problem) {
        event.preventDefault();
        note.scrollIntoView({ block: "center" });
      }
    });
  });
})();
