// A stand-in for react-dom's development build, for the dev proxy's tests (the test
// copies it into the project's node_modules, so Vite pre-bundles it into .vite/deps as it
// does react-dom): it renders a function component from the scheduler, not from its
// caller, and when the component throws it logs what React 18.3 logs (logCapturedError:
// one console.error string, "The above error occurred in the <Name> component:", the
// component stack, then the advice), and rethrows the error to the window.

// React builds component stacks from native stack frames, one `    at Name (URL:L:C)`
// line per component and `    at tag` per host element; here, from the error's stack.
function describeComponentFrame(error, name) {
  const lines = String(error.stack || "").split("\n");
  const own = lines.find((line) => line.trim().startsWith("at " + name + " ("));
  return "\n    at " + (own ? own.trim().slice(3) : name);
}

function renderWithHooks(Component, props) {
  return Component(props);
}

function logCapturedError(error, Component) {
  const componentStack = describeComponentFrame(error, Component.name) + "\n    at div";
  const componentNameMessage =
    "The above error occurred in the <" + Component.name + "> component:";
  const errorBoundaryMessage =
    "Consider adding an error boundary to your tree to customize error handling behavior.\n" +
    "Visit https://reactjs.org/link/error-boundaries to learn more about error boundaries.";
  const combinedMessage =
    componentNameMessage + "\n" + componentStack + "\n\n" + ("" + errorBoundaryMessage);
  console["error"](combinedMessage);
}

function commitRoot(error, Component) {
  logCapturedError(error, Component);
  setTimeout(function rethrow() {
    throw error;
  }, 0);
}

function workLoop(container, Component, props) {
  try {
    container.textContent = renderWithHooks(Component, props);
  } catch (error) {
    commitRoot(error, Component);
  }
}

export function createRoot(container) {
  return {
    render(Component, props) {
      setTimeout(function performWorkUntilDeadline() {
        workLoop(container, Component, props);
      }, 0);
    },
  };
}
