/**
 * Labelled training examples for the task classifier: short requests of the kind people send
 * to a gateway, one array per task type. Add examples here to teach the classifier; the test
 * suite checks accuracy on held-out requests that are not in this file.
 */
export const TaskTypes = ["code", "math", "research", "creative", "analysis", "summarization", "translation", "general"] as const
export type TaskType = (typeof TaskTypes)[number]

export const taskDescriptions: Record<TaskType, string> = {
  code: "write, fix, explain, review or refactor source code, scripts and queries",
  math: "calculate, solve equations, prove, work with numbers and formulas",
  research: "find and explain facts, history, science, sources and comparisons of known things",
  creative: "write stories, poems, lyrics, slogans, jokes and other imaginative text",
  analysis: "evaluate options, data, risks, trade-offs, strategies and arguments",
  summarization: "condense a given text into a shorter summary, key points or TL;DR",
  translation: "translate text from one language into another",
  general: "conversation, everyday advice, recommendations and small talk"
}

export const taskExamples: Record<TaskType, ReadonlyArray<string>> = {
  code: [
    "Write a Python function that reverses a linked list",
    "Fix this TypeScript error: property does not exist on type",
    "Why does my JavaScript loop print undefined?",
    "Refactor this Java class to use dependency injection",
    "Write a SQL query that returns the top 5 customers by revenue",
    "How do I read a file line by line in Rust?",
    "Explain what this regex does: ^[a-z0-9_-]{3,16}$",
    "My React component re-renders forever, here is the code",
    "Implement binary search in Go with unit tests",
    "Write a bash script that backs up a directory every night",
    "Debug this segmentation fault in my C program",
    "Convert this callback-based Node.js code to async/await",
    "Review my pull request for bugs and code style",
    "Create a REST API endpoint in Express that returns JSON",
    "What is the difference between an interface and an abstract class in C#?",
    "Compile error: undefined reference to main, how to fix the build?"
  ],
  math: [
    "Solve the equation 3x + 7 = 22",
    "What is the derivative of x^3 * sin(x)?",
    "Calculate 17% of 2,340",
    "Prove that the square root of 2 is irrational",
    "Integrate e^(2x) from 0 to 1",
    "What is the probability of rolling two sixes with two dice?",
    "Find the eigenvalues of the matrix [[2, 1], [1, 2]]",
    "How many ways can 5 people sit around a round table?",
    "Simplify the fraction 84/126",
    "Compute the compound interest on 1000 at 5% for 10 years",
    "Solve this system of linear equations: x + y = 10, x - y = 2",
    "What is the sum of the first 100 positive integers?",
    "Explain the Pythagorean theorem with a worked example",
    "Find the limit of (1 + 1/n)^n as n goes to infinity",
    "Convert 72 degrees Fahrenheit to Celsius step by step"
  ],
  research: [
    "What caused the fall of the Roman Empire?",
    "Find recent studies on the effects of intermittent fasting",
    "Who invented the printing press and when?",
    "What is known about dark matter according to current physics?",
    "Give me sources about the history of the Silk Road",
    "How do mRNA vaccines work?",
    "What are the main theories about the origin of language?",
    "Compare the economic policies of Keynes and Hayek",
    "Which countries have the highest literacy rates?",
    "What does the scientific literature say about microplastics in drinking water?",
    "Explain the causes of the 2008 financial crisis with references",
    "When was the Great Wall of China built and why?",
    "What is the current evidence on climate change and sea level rise?",
    "Look up the population and capital of each Nordic country",
    "Background information on the life of Marie Curie"
  ],
  creative: [
    "Write a short story about a robot who learns to paint",
    "Compose a haiku about autumn rain",
    "Write a poem for my grandmother's 90th birthday",
    "Invent a slogan for an eco-friendly coffee brand",
    "Write song lyrics about a summer road trip",
    "Create a fantasy world with three kingdoms and their myths",
    "Tell me a funny joke about cats",
    "Write the opening paragraph of a mystery novel set in Venice",
    "Imagine a dialogue between Socrates and a smartphone",
    "Write a limerick about a forgetful wizard",
    "Brainstorm names for a science fiction spaceship",
    "Write a bedtime story for a five year old about a brave turtle",
    "Draft a wedding toast that is heartfelt and funny",
    "Create a character description for a villain in a graphic novel"
  ],
  analysis: [
    "What are the pros and cons of moving our servers to the cloud?",
    "Analyse this sales data and tell me which region is underperforming",
    "Evaluate the risks of launching the product in Europe first",
    "Compare these two job offers and recommend one",
    "Assess the strengths and weaknesses of this business plan",
    "Why did our customer churn increase last quarter? Here are the numbers",
    "Do a SWOT analysis for a small bakery",
    "Critique the argument in this op-ed",
    "Which of these three marketing strategies gives the best return on investment?",
    "Identify trends in this table of monthly website traffic",
    "Weigh the trade-offs between microservices and a monolith for our team",
    "Analyze the root cause of the outage from these incident logs",
    "Is it better to lease or buy a car for a small company? Evaluate both",
    "Interpret the results of this A/B test with a conversion of 3.1% versus 3.4%"
  ],
  summarization: [
    "Summarize this article in three bullet points",
    "Give me a TL;DR of the following email thread",
    "Condense this report into one paragraph",
    "What are the key points of this meeting transcript?",
    "Summarise the main arguments of this paper",
    "Make a short summary of this chapter for my notes",
    "Shorten this text to under 100 words",
    "Extract the main takeaways from this podcast transcript",
    "Write an executive summary of the attached document",
    "Boil this long post down to a couple of sentences",
    "Give me the gist of these meeting minutes",
    "Recap the plot of this book chapter briefly",
    "Summarize the customer reviews below into main themes",
    "Create an abstract for this research text"
  ],
  translation: [
    "Translate this sentence into French: where is the train station?",
    "How do you say thank you very much in Japanese?",
    "Translate the following paragraph from German to English",
    "Please translate this menu into Spanish",
    "What does 'carpe diem' mean in English?",
    "Translate my email to Italian and keep it formal",
    "Convert this English text to Portuguese",
    "Translate 'good morning, how are you' into Korean",
    "Render this Chinese poem in English",
    "Translate these product descriptions into Dutch",
    "What is the Russian word for library?",
    "Translate the user manual from English into Polish",
    "Can you translate this letter into Arabic?",
    "How would I say 'I am allergic to nuts' in Thai?"
  ],
  general: [
    "Hi, how are you today?",
    "What should I cook for dinner tonight?",
    "Can you recommend a good book to read on holiday?",
    "Thanks, that was helpful!",
    "What's a good gift for my sister who likes gardening?",
    "I feel tired all the time, any tips to sleep better?",
    "Tell me about yourself",
    "Good morning! Any plans for the weekend?",
    "How can I be more productive when working from home?",
    "What movie should I watch tonight?",
    "Help me plan a relaxing day off",
    "What are some fun things to do with kids on a rainy day?",
    "How do I politely decline an invitation?",
    "Any advice for my first day at a new job?"
  ]
}
